"""The screen: one thin script per page (Streamlit's pages/ mode); shared widgets in views/."""
