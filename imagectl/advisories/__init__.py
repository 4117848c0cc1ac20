"""Advisories as data: which locked packages of which images an OSV advisory affects.

The records are OSV (the format of PyPA's advisory database and of GitHub's), stored as JSON under
``matrices/advisories/<package>/<ID>.json`` (each with the ``source`` it was read from) and in the team's
``[paths] advisories`` folders.  :mod:`.record` reads one record, :mod:`.match` tells which locked packages a record
affects, :mod:`.snapshot` reads the folders, :mod:`.sync` refreshes the shipped folder, :mod:`.gate` is
``[advisories] fail_on``.  Nothing read from a record runs code: JSON only, through :func:`json.loads`.
"""
