"""What `triage daily` needs besides the stages themselves: a lock so that two runs never
overlap, the run record that makes a killed run's successor complete it, and the digest's
delivery (a file, standard output, or e-mail through the standard library's SMTP client).

The run record lives in the store (a Chroma server holds it too): when the last digest was
made. The next digest covers every paper added since, so a run killed before its digest
loses nothing: the next one's digest has its papers.
"""

from __future__ import annotations

import fcntl
import os
import smtplib
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from assistant.config import Settings
from assistant.errors import ConfigError, TriageError
from assistant.store import Store

RUN_RECORD = "daily-run"
FIRST_DIGEST = timedelta(days=1)  # the first daily digest covers the last day
# How far another machine's clock may be behind this one's when it stamps a paper it writes
# (`touched`): the digest reads the papers written since the last one, less this.
CLOCK_MARGIN = timedelta(days=1)


class Busy(TriageError):
    """Another daily run holds the lock."""


def lock_path(store: Store) -> Path | None:
    """The daily run's lock file: beside the store's writer lock (per store, or per server
    collection on this machine)."""
    if store.lock_path is None:
        return None
    return store.lock_path.with_name(store.lock_path.stem + "-daily.lock")


@contextmanager
def daily_lock(store: Store) -> Iterator[None]:
    """Hold the daily lock, or raise Busy at once (a cron job must not queue up behind a slow
    run). The lock goes with the process: a killed run leaves nothing to clean up."""
    path = lock_path(store)
    if path is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the block
    except OSError:
        yield  # a store that cannot be written fails on its first write instead
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise Busy(f"another 'triage daily' is running ({holder}): this one stops") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, started {datetime.now().astimezone():%Y-%m-%d %H:%M}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass
class RunRecord:
    """When the last daily digest was made (None: never)."""

    last_digest: datetime | None = None
    last_started: datetime | None = None

    @classmethod
    def load(cls, store: Store) -> RunRecord:
        value = store.get_value(RUN_RECORD)
        if not isinstance(value, dict):
            return cls()

        def when(key: str) -> datetime | None:
            text = value.get(key)
            try:
                return datetime.fromisoformat(text) if isinstance(text, str) else None
            except ValueError:
                return None

        return cls(when("last_digest"), when("last_started"))

    def save(self, store: Store) -> None:
        store.set_value(
            RUN_RECORD,
            {
                "last_digest": self.last_digest.isoformat() if self.last_digest else None,
                "last_started": self.last_started.isoformat() if self.last_started else None,
            },
        )

    def digest_after(self, now: datetime) -> datetime:
        """The moment the next digest covers papers from."""
        return self.last_digest or now - FIRST_DIGEST

    def touched_after(self) -> float:
        """Papers written after this (seconds since the epoch) may still need enriching."""
        when = self.last_digest
        return when.timestamp() if when else time.time() - FIRST_DIGEST.total_seconds()


def check_email(settings: Settings) -> None:
    """A one-line error unless the settings say where to send the digest."""
    if not settings.smtp_host or not settings.digest_to:
        raise ConfigError(
            "e-mailing the digest needs smtp_host and digest_to in the config file (and "
            "digest_from, smtp_port, smtp_user and SMTP_PASSWORD as your mail server wants)"
        )


def send_email(settings: Settings, subject: str, text: str) -> list[str]:
    """Send the digest to `digest_to` through `smtp_host` (STARTTLS on 587, TLS on 465);
    returns the recipients."""
    check_email(settings)
    assert settings.smtp_host is not None
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = settings.digest_from or settings.smtp_user or f"triage@{socket.getfqdn()}"
    message["To"] = ", ".join(settings.digest_to)
    message.set_content(text)
    host, port = settings.smtp_host, settings.smtp_port
    try:
        smtp: Any
        if port == 465:
            smtp = smtplib.SMTP_SSL(host, port, timeout=60, context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(host, port, timeout=60)
        with smtp:
            if port != 465:
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls(context=ssl.create_default_context())
                    smtp.ehlo()
            if settings.smtp_user:
                password = settings.smtp_password.get_secret_value() if settings.smtp_password else ""
                smtp.login(settings.smtp_user, password)
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise TriageError(f"could not send the digest through {host}:{port}: {exc}") from None
    return list(settings.digest_to)
