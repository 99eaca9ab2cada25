"""Active checks of `tlsprobe scan`: each a probe that makes its own connections and returns
a `CheckResult` (tlsprobe/model/checks.py). `catalog.py` names them; `base.py` runs them."""
