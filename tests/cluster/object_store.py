"""A real S3-compatible server on loopback (moto's server mode, from PyPI) and the settings a
job needs to keep its warehouse there.

Credentials and the endpoint reach both engines through the environment only, as on a real
deployment: Spark's S3A connector takes them from ``PLATFORM_SPARK_CONF`` (``fs.s3a.*``, no
secrets) and the standard ``AWS_*`` variables; ``deltalake`` (the driver-side writes) reads the
same ``AWS_*`` variables.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.standalone import free_port

HADOOP_AWS = "org.apache.hadoop:hadoop-aws:3.5.0"
"""The S3A connector at the version of the Hadoop client pyspark ships (hadoop-client-api
3.5.0); it brings the AWS SDK v2 bundle it was built against."""


@dataclass
class ObjectStore:
    endpoint: str
    process: subprocess.Popen

    def environment(self) -> dict[str, str]:
        """What a job's process needs to reach the store (test credentials: moto accepts any)."""
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true",
                # a test server without conditional writes: one writer per table at a time
                # (docs/operations.md: real S3 has them, and delta-rs uses them there)
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def spark_conf(self) -> dict[str, str]:
        return {"spark.jars.packages": HADOOP_AWS,
                "spark.hadoop.fs.s3a.endpoint": self.endpoint,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                "spark.hadoop.fs.s3a.aws.credentials.provider":
                    "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"}

    def create_bucket(self, name: str) -> str:
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass
        return f"s3a://{name}"

    def _client(self):
        import boto3  # a moto dependency

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def keys(self, bucket: str, prefix: str) -> list[str]:
        """Every object under ``prefix``, through the S3 API."""
        pages = self._client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                          Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Every file under ``folder`` to ``s3a://<bucket>/<prefix>/<relative path>``."""
        client = self._client()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")
        return f"s3a://{bucket}/{prefix}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def start_object_store(folder: Path) -> ObjectStore:
    """moto's S3 server on 127.0.0.1 (tests/cluster/moto_s3.py); returns once it answers."""
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "moto.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "tests.cluster.moto_s3", str(port)],
                               cwd=Path(__file__).resolve().parents[2], stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    store = ObjectStore(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{store.endpoint}/", timeout=2):
                return store
        except OSError:
            time.sleep(0.3)
    store.stop()
    raise RuntimeError(f"the S3-compatible server did not start; see {folder / 'moto.log'}")
