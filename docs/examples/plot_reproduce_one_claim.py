"""
# Reproduce one claim

Run the sweep of one claim of the paper (claim 1: SCL and HSCL reach neural collapse whatever the hardness;
docs/theory.md, section 9) and read its verdict rows. The ``tiny`` scale trains 2-epoch runs on a shrunken grid
in seconds: it checks the plumbing and **decides nothing** (its verdicts carry no evidence). ``scale="quick"``
or ``"full"`` is the real thing (``ncgeom reproduce --quick`` runs every claim; docs/getting_started.md).
"""

# %%
# The claim's sweep into a temporary folder, one worker; the result is also written to claims/1.json there.
import tempfile

from ncgeom.campaigns.claims import CLAIMS, records_markdown, run_claims

print("claim 1:", CLAIMS["1"].statement)
with tempfile.TemporaryDirectory() as out:
    (result,) = run_claims(out, claim_ids=["1"], scale="tiny", workers=1, progress=False)
print(f"{result.runs} runs, spec {result.spec}")

# %%
# The verdict rows: one per grid point, then the overall verdict (bold), each on means over the seeds.
print(records_markdown(result.rows))
