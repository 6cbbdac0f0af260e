"""Rules of docs/openapi.yaml that a JSON schema cannot state, applied to schemathesis's cases.

Three rules depend on when a request is sent rather than on its shape:

- An ETA must lie between the order's creation (less ten minutes of clock skew) and 48 hours ahead.
  A well-formed `estimatedArrival` is moved to one hour from now; a malformed one is left as it is,
  so that the server's refusal of it is still tested.
- A webhook replay's range has `until` not before `since` (and only the last 30 days hold events):
  well-formed `since` and `until` become the last hour.
- An `Idempotency-Key` names one request: the same key with a different body is refused with
  `422 idempotency_mismatch`, as the document says. The generator repeats short keys across unrelated
  requests, so each well-formed key is made unique per request.
"""

import re
import uuid
from datetime import datetime, timedelta, timezone

import schemathesis


def _is_date_time(value):
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@schemathesis.hook
def before_call(context, case, kwargs):
    if isinstance(case.body, dict) and _is_date_time(case.body.get("estimatedArrival")):
        soon = datetime.now(timezone.utc) + timedelta(hours=1)
        case.body["estimatedArrival"] = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(case.body, dict) and _is_date_time(case.body.get("since")):
        now = datetime.now(timezone.utc)
        case.body["since"] = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        if _is_date_time(case.body.get("until")):
            case.body["until"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key" and re.fullmatch(r"[!-~]{1,255}", str(headers[name])):
            headers[name] = "schemathesis-" + uuid.uuid4().hex
