"""Offline analysis of captures: the TLS connections of a pcap/pcapng, one report each.

    with CaptureAnalysis(path_or_dash, AnalyzerOptions(keylog=...)) as analysis:
        for report, trace in analysis:  # offline.datagram.Analyzed, as connections end
            ...                         # report: model.capture.ConnectionReport
    analysis.summary                    # CaptureSummary: packets, warnings, counts

(a trace also needs `trace_formatter`, e.g. report.trace.TraceFormatter.)

Module map: analyzer (the loop over capture events; a connection whose handshake is over
is handed back to the capture layer, which then only counts its bytes), caches (the memo
and memory budget of one analysis), connection (one TCP connection), framing (where
records start: preambles, mid-stream, resync after gaps), fast (the fast record/handshake
reader), flowreader (the session.Flow reader: --msg trace, decryption), decrypt (key log ->
record protection), facts (what the messages said; the hellos and other messages are
summarised by wire.hello_summary, wire.hello_info and wire.summary), build (facts ->
report, in model.describe's words), fingerprints (JA3, JA3S, JA4), datagram (the base of
the UDP trackers), quic (QUIC Initial packets), dtls (DTLS handshakes), openvpn /
openvpn_channel (TLS inside OpenVPN), filters, stats.
"""

from tlsprobe.offline.analyzer import (
    Analyzed,
    AnalyzerOptions,
    CaptureAnalysis,
    analyze,
)

__all__ = ["Analyzed", "AnalyzerOptions", "CaptureAnalysis", "analyze"]
