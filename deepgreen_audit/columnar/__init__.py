"""The columnar engine: a table's columns as numpy arrays, rows grouped by key (`frame`),
and the evidence a finding cites (`evidence`); what every audited kind and every analysis
computes on, below all of them."""
