"""What `kubetwin validate` (and so `kubetwin run`) rejects, warns about or notices, across every domain.

It sits above the domain packages (it asks serving which flags vLLM has, devices which MIG profiles exist, Kueue
which frameworks it manages), so `api` below stays free of them: `validate.validate` is the entry point.
"""
