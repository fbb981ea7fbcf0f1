"""A model named by its Hugging Face Hub id (`--hf-model ORG/NAME[@REVISION]`): its config.json and, where the
repository has them, the files beside it (llmcalc/inputs/hf.py SIDECARS), fetched through huggingface_hub (the
optional extra `[hub]`, imported only here) into the Hub's own cache, then read by the importer as the local
folder they land in.

huggingface_hub itself honours HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE and HF_HOME / HF_HUB_CACHE; nothing here
overrides them. Each request waits at most HF_HUB_ETAG_TIMEOUT (metadata) and HF_HUB_DOWNLOAD_TIMEOUT (a read)
seconds, DEFAULT_TIMEOUT_S where they are unset; the files read are bounded in size by the importer.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from llmcalc.errors import UserError

NEEDS = "`hf_model` needs huggingface_hub: pip install 'llmcalc-cost[hub]'"
DEFAULT_TIMEOUT_S = 10
"""Seconds a metadata request or a read may wait when HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT are unset."""
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
ID = re.compile(rf"({_PART})/({_PART})(?:@([^\s@]{{1,255}}))?")
"""ORG/NAME[@REVISION]: the Hub's repository names (letters, digits, `-`, `_`, `.`; at most 96 characters, no
`--` or `..`: huggingface_hub's validate_repo_id) and a branch, tag or commit."""


def parse_id(ref: str) -> tuple[str, str | None]:
    """(ORG/NAME, REVISION or None) of `ref`, or a one-line error naming the form."""
    m = ID.fullmatch(ref.strip())
    if m is None or any(bad in ref for bad in ("--", "..")) or m[2].endswith(".git"):
        raise UserError(f"`hf_model` {ref!r}: not a Hub model id; give ORG/NAME or ORG/NAME@REVISION "
                        "(e.g. Qwen/Qwen3-8B@main)")
    return f"{m[1]}/{m[2]}", m[3]


_UNREACHED: list[tuple[float, str]] = []
"""When (time.monotonic()) and why the Hub could not be reached, once a fetch in this process found so: a later
fetch within UNREACHED_S (a scenario file's next `hf_model`) fails at once rather than waiting out the same
timeouts again; after it, the Hub is tried again (a long-lived process: `llmcalc ui`)."""
UNREACHED_S = 60.0
"""Seconds a failure to reach the Hub is taken as still holding."""


_FETCHED: dict[str, tuple[float, tuple[Path, str, str]]] = {}
"""What a fetch in this process gave for a ref, and when: the same ref fetched again within UNREACHED_S (the web
page fetches a model before its run, then the run fetches it) is answered from here, while its folder is
there, without asking the Hub again; at most FETCHED_KEPT refs are kept, the oldest dropped first."""
FETCHED_KEPT = 64


def _unreached(why: str) -> None:
    _UNREACHED[:] = [(time.monotonic(), why)]


def fetch(ref: str) -> tuple[Path, str, str]:
    """The folder in the Hub cache holding `ref`'s config.json (and the SIDECARS the repository has), the
    repository's name and the source to cite (the URL of its config.json at the commit fetched)."""
    repo, revision = parse_id(ref)
    if ref in _FETCHED and time.monotonic() - _FETCHED[ref][0] < UNREACHED_S and _FETCHED[ref][1][0].is_dir():
        return _FETCHED[ref][1]
    if _UNREACHED and (ago := time.monotonic() - _UNREACHED[0][0]) < UNREACHED_S:
        raise UserError(f"`hf_model` {ref}: not fetched, the Hub could not be reached {ago:.0f} s ago "
                        f"({_UNREACHED[0][1]}); try again in a minute")
    for var in ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"):
        os.environ.setdefault(var, str(DEFAULT_TIMEOUT_S))  # read by huggingface_hub when it is imported
    try:
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:
        raise UserError(NEEDS) from None
    from llmcalc.inputs.hf import SIDECARS

    if not os.environ.get("HF_HUB_VERBOSITY"):  # its retry warnings would come before our one line
        import logging

        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)

    def get(filename: str) -> Path:
        try:
            return Path(hf_hub_download(repo, filename, revision=revision))
        except Exception as e:  # noqa: BLE001: every failure of the Hub client becomes one line
            line = explain(e, ref, filename, constants)
            if any(word in type(x).__name__ for x in _chain(e) for word in ("Timeout", "ConnectError", "NetworkError")):
                _unreached(line.split(": ", 1)[1])
            raise UserError(line) from None

    def files() -> Path:
        config = get("config.json")
        for name in SIDECARS:
            try:
                get(name)
            except UserError as e:
                if not isinstance(e.__context__, EntryNotFoundError):  # absent from the repository (or the cache)
                    raise
        return config

    deadline = deadline_s(constants)
    late = (f"{constants.ENDPOINT} did not answer within {deadline} s; check the network or HF_ENDPOINT, or set "
            "HF_HUB_OFFLINE=1 to use the Hub cache")
    try:
        config = bounded(files, deadline, f"`hf_model` {ref}: {late}")
    except Late:
        _unreached(late)
        raise
    commit = config.parent.name
    found = config.parent, repo.split("/")[1], f"{constants.ENDPOINT}/{repo}/blob/{commit}/config.json"
    _FETCHED.pop(ref, None)
    _FETCHED[ref] = (time.monotonic(), found)
    while len(_FETCHED) > FETCHED_KEPT:
        del _FETCHED[next(iter(_FETCHED))]
    return found


def deadline_s(constants) -> int:
    """Seconds the whole fetch may take: huggingface_hub retries a failed request up to five times with a backoff
    (1 + 2 + 4 + 8 + 8 s) and a longer timeout, minutes for a Hub that accepts connections and never answers;
    llmcalc stops waiting after three times the two timeouts, and at least 30 s."""
    return max(30, 3 * (int(constants.HF_HUB_ETAG_TIMEOUT) + int(constants.HF_HUB_DOWNLOAD_TIMEOUT)))


class Late(UserError):
    """The work `bounded` waited for did not end in time."""


def bounded(work, seconds: float, late: str):
    """work() run in a daemon thread, its result or its error; a UserError saying `late` when it takes longer than
    `seconds` (Late; the thread is left behind: the command ends with the error, and the process with it)."""
    import threading

    out: dict = {}

    def call() -> None:
        try:
            out["value"] = work()
        except BaseException as e:  # noqa: BLE001: handed to the caller
            out["error"] = e

    thread = threading.Thread(target=call, daemon=True, name="hf-fetch")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Late(late)
    if "error" in out:
        raise out["error"]
    return out["value"]


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and the errors it was raised from."""
    seen: list[BaseException] = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return seen


def explain(e: Exception, ref: str, filename: str, constants) -> str:
    """One line for a failed download of `filename` of `ref`: what went wrong and the fix."""
    from huggingface_hub import errors

    at, endpoint = f"`hf_model` {ref}", constants.ENDPOINT
    chain = _chain(e)
    names = " ".join(type(x).__name__ for x in chain)
    http = next((x for x in chain if isinstance(x, errors.HfHubHTTPError) and x.response is not None), None)
    status = http.response.status_code if http is not None else None
    if isinstance(e, errors.GatedRepoError) or status == 403:
        return (f"{at}: gated or private (HTTP {status}); accept its licence on its Hub page and set HF_TOKEN to a "
                "token that may read it")
    if isinstance(e, errors.RepositoryNotFoundError):
        if status == 401:
            return (f"{at}: not found, or private or gated (HTTP 401); check the id, or set HF_TOKEN to a token "
                    "that may read it and accept its licence on its Hub page")
        return f"{at}: no such model repository on {endpoint} (HTTP {status}); check the id"
    if isinstance(e, errors.RevisionNotFoundError):
        return f"{at}: revision not found on {endpoint}; give a branch, tag or commit it has (default: main)"
    if isinstance(e, errors.RemoteEntryNotFoundError):
        return f"{at}: the repository has no {filename}; give a transformers model's repository"
    if isinstance(e, errors.HFValidationError) or isinstance(e, ValueError) and "repo" in str(e).lower():
        return f"{at}: not a Hub model id; give ORG/NAME or ORG/NAME@REVISION"
    if constants.HF_HUB_OFFLINE or "OfflineModeIsEnabled" in names:
        return (f"{at}: HF_HUB_OFFLINE is set and {filename} is not in the Hub cache ({constants.HF_HUB_CACHE}); "
                "fetch it once online, or unset HF_HUB_OFFLINE")
    if "Timeout" in names:
        return (f"{at}: {endpoint} did not answer within {constants.HF_HUB_ETAG_TIMEOUT} s; check the network "
                "or HF_ENDPOINT, or raise HF_HUB_ETAG_TIMEOUT")
    if "ConnectError" in names or "NetworkError" in names:
        return (f"{at}: cannot connect to {endpoint}; check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 "
                "to use the Hub cache")
    if status is not None:
        return f"{at}: {endpoint} answered HTTP {status} for {filename}; try again later"
    if isinstance(e, OSError) and not isinstance(e, errors.EntryNotFoundError):
        return f"{at}: {filename} could not be stored ({type(e).__name__}); check HF_HOME and its free space"
    return f"{at}: {filename} could not be fetched ({type(e).__name__}); check the network and HF_ENDPOINT"
