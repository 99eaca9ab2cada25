"""Failure kinds travel with the failure (errors.FailureKind), never sorted by message text:
a server can put any words ("refused", "timed out") into what we quote from it."""

from __future__ import annotations

from tlsprobe.engine.client import HandshakeFailure
from tlsprobe.errors import EXIT_NETWORK, EXIT_PROTOCOL, FailureKind, NetworkError, exit_code_for
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import _unreached
from tlsprobe.probes.audit.scheduler import INCONCLUSIVE, Outcome, Scheduler, TargetRunner

WORDY = "protocol error: server sent a malformed Certificate: 'connection refused, timed out'"


def test_an_audit_that_reached_nothing_reports_the_kind_of_its_outcome():
    runner = TargetRunner(Target("127.0.0.1", 443), Scheduler())
    runner.first_unsure = Outcome(INCONCLUSIVE, reason=WORDY, kind=FailureKind.PROTOCOL)
    message, kind = _unreached(runner) or ("", None)
    assert kind is FailureKind.PROTOCOL and exit_code_for(kind) == EXIT_PROTOCOL
    assert message.startswith(WORDY)


def test_kinds_are_enum_members_that_print_and_compare_as_before():
    failure = HandshakeFailure("alert", "server sent fatal alert handshake_failure (40)", 40)
    assert failure.kind is FailureKind.ALERT and failure.kind == "alert"
    network = NetworkError("example.test:443: connection refused", "refused",
                           "connection refused")
    assert network.kind is FailureKind.NETWORK and f"{network.kind}" == "network"
    assert network.cause == "refused" and network.reason == "connection refused"
    assert exit_code_for(network.kind) == EXIT_NETWORK == network.exit_code
