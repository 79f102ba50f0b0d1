"""Router: the pages, and a sidebar with Ollama's health."""
import streamlit as st

from pages.common import ollama_checks, resources

st.set_page_config(page_title="RAG quality workbench", page_icon="🔎", layout="wide")

settings, _ = resources()
with st.sidebar:
    checks = ollama_checks(settings.ollama_host, settings)
    failed = [c for c in checks if not c.ok]
    if failed:
        st.error(f"Ollama: {len(failed)} problem(s); see Settings & health", icon="🚫")
    else:
        st.success(f"Ollama ready at {settings.ollama_host}", icon="✅")

page = st.navigation([
    st.Page("pages/chat.py", title="Chat", icon="💬", default=True),
    st.Page("pages/evaluate.py", title="Evaluate", icon="🧪"),
    st.Page("pages/runs.py", title="Runs", icon="🗂️", url_path="runs"),
    st.Page("pages/detector.py", title="Detector", icon="🎯"),
    st.Page("pages/knowledge_base.py", title="Knowledge base", icon="📚"),
    st.Page("pages/settings.py", title="Settings & health", icon="⚙️"),
])
page.run()
