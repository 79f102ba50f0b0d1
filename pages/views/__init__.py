"""Streamlit widgets shared by the pages."""
