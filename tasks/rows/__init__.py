"""The row types every feature of a payout run shares, below them all (contract tasks-by-feature): the
validated row and its located issues (`payout_row`), the pre-flight's name check (`name_check`), what happened
to a row and what the run knows of it (`outcome`), and the sink intake writes a large sheet's rows to
(`sink`). Imported from their modules (nothing is loaded here: the parser child stays light).

May import: connectors (the wire statuses and patterns), nothing else of payops.
"""
