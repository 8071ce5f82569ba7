"""Importers: other campaigns' records turned into replication packages.

Each source has a module with ``import_source(path, out, ...) -> Path``; the
`import` verb dispatches on the source's name through `SOURCES`.
"""

#: Source name -> module implementing `import_source` (another source: one more line).
SOURCES: dict[str, str] = {
    "legacy": "deepgreen_audit.importers.legacy",
    "greenlight": "deepgreen_audit.importers.greenlight",
    "codecarbon": "deepgreen_audit.codecarbon.importer",
}
