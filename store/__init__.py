"""Everything that remembers: the DuckDB connection, migrations and typed read/write functions."""
