"""Settings (read-only) and the doctor's checks."""

import pandas as pd
import streamlit as st

from pages.views.common import escape_keeping_code, page_setup
from pages.views.markup import escape_markdown
from pipeline.models.health import check_all

settings, db = page_setup("Settings & health")
st.title("Settings & health")

st.subheader("Health")
if st.button("Check again"):
    st.cache_data.clear()
for check in check_all(settings, db):
    line = f"**{escape_markdown(check.name)}**: {escape_markdown(check.detail)}"
    if check.ok:
        st.success(line, icon=":material/check_circle:")
    else:
        st.error(line + (f"  \nFix: {escape_keeping_code(check.fix)}" if check.fix else ""), icon=":material/error:")

st.subheader("Settings")
st.caption("Read-only here. Set them with environment variables or a workbench.toml file, then restart the app.")
st.dataframe(
    pd.DataFrame(settings.public_items(), columns=["setting", "value", "environment variable"]),
    hide_index=True,
    width="stretch",
)
