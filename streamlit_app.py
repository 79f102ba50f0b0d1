"""Router: the pages, and a sidebar with Ollama's health and the open regression alerts."""
import streamlit as st

from app_pages.common import ollama_checks, resources
from store.alerts import count_open_alerts

st.set_page_config(page_title="RAG quality workbench", page_icon="🔎", layout="wide")

settings, db = resources()
with st.sidebar:
    checks = ollama_checks(settings.ollama_host, settings)
    failed = [c for c in checks if not c.ok]
    if failed:
        st.error(f"Ollama: {len(failed)} problem(s); see Settings & health", icon="🚫")
    else:
        st.success(f"Ollama ready at {settings.ollama_host}", icon="✅")
    open_alerts = count_open_alerts(db)
    if open_alerts:
        st.warning(f"{open_alerts} open regression alert(s): see Trends", icon="🔔")
    else:
        st.caption("No open regression alerts.")

page = st.navigation([
    st.Page("app_pages/chat.py", title="Chat", icon="💬", default=True),
    st.Page("app_pages/evaluate.py", title="Evaluate", icon="🧪"),
    st.Page("app_pages/runs.py", title="Runs", icon="🗂️", url_path="runs"),
    st.Page("app_pages/annotate.py", title="Annotate", icon="✍️"),
    st.Page("app_pages/calibration.py", title="Calibration", icon="⚖️"),
    st.Page("app_pages/trends.py", title="Trends", icon="📈"),
    st.Page("app_pages/detector.py", title="Detector", icon="🎯"),
    st.Page("app_pages/knowledge_base.py", title="Knowledge base", icon="📚"),
    st.Page("app_pages/settings.py", title="Settings & health", icon="⚙️"),
])
page.run()
