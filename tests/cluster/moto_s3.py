"""moto's S3 server (``python -m moto.server``'s application and request handler), with one
fix: Werkzeug's development server answers ``Expect: 100-continue`` twice (Python's
``http.server`` sends ``100 Continue`` and Werkzeug writes another), and the AWS SDK v2 in
Hadoop's S3A connector then reads the second as the final status of every upload ("Status Code:
100"). Here ``http.server`` leaves it to Werkzeug, so each request gets one.

    python -m tests.cluster.moto_s3 <port>
"""

from __future__ import annotations

import sys

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


class OneContinueRequestHandler(MotoRequestHandler):
    def handle_expect_100(self) -> bool:
        return True  # Werkzeug's run_wsgi sends the 100 Continue


if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app),
               threaded=True, request_handler=OneContinueRequestHandler)
