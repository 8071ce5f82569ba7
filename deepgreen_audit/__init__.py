"""DeepGreen Audit: collect, audit and render auditable energy measurements of deep learning.

The one artefact every layer reads and writes is the replication package
(four tables + SHA256SUMS described by datapackage.json); see
`deepgreen_audit.package`.
"""

__version__ = "0.1.0"
