"""Verify a delivery as a Standard Webhooks receiver does, with the reference library.

Usage: verify_webhook.py KEY < {"headers": {...}, "body": "..."}
Exits 0 when the delivery verifies under KEY (`whsec_…`); 1, printing why, when it does not.
The library is PyPI's `standardwebhooks` (scripts/test installs it into a virtual environment
and names its Python in TE_TEST_WEBHOOKS_PYTHON): an implementation of the specification
written apart from the service's, so a test passing with it is not the service agreeing with
itself.
"""

import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

request = json.load(sys.stdin)
try:
    Webhook(sys.argv[1]).verify(request["body"], request["headers"], json_parse=False)
except WebhookVerificationError as refused:
    print(refused)
    sys.exit(1)
