"""The calculator as a local web page (`llmcalc ui`): a second front end beside the command line, asking the
commands themselves (llmcalc/cli/invoke.py) and showing their reports. Needs the optional extra `[ui]`
(starlette, uvicorn)."""
