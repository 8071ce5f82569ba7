"""The command line's verbs, one module per concept (audit, collect, stacks, greenlight,
importers, render, compare), each registering its verbs on the parser and calling one
library function per verb: parsing and printing only.  Above every library module; only
`deepgreen_audit.cli` imports them, each when its verb is named."""
