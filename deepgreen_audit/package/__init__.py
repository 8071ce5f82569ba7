"""The package format: its descriptor, tables, checksums and schemas, read and written atomically;
validation, run directories and their round trip; what kind of package a descriptor declares."""
