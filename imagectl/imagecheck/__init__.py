"""The in-image check: what a container reports about itself, compared with what its image promised.

:mod:`.compare` is pure (report and expectations in, findings out); :mod:`.run` runs the check script in a
throw-away container through the engine seam.  The expectations come from :mod:`imagectl.labels`.
"""
