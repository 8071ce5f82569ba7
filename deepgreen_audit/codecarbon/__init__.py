"""Anyone's CodeCarbon logs as a package of kind `codecarbon-log`, and their audit.

`importer` reads emissions.csv files of every CodeCarbon layout (`layout`); `hardware` holds
what CodeCarbon's power models are (its own CPU table, the RAM models of each version) and
the GPU board limits; `context` is what the checks read; `checks` are the registered checks
of the suite `codecarbon` (and which S5 checks of the campaign audit are reused as they are);
`verdict` words, per log and per run, whether the energy was measured or modelled; `audit`
runs it all into one report; `docs` writes docs/codecarbon-logs.md.
"""
