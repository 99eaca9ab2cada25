"""Offline analysis of captures: the TLS connections of a pcap/pcapng, one report each.

    analysis = CaptureAnalysis(path_or_dash, AnalyzerOptions(trace=..., keylog=...))
    for report, trace in analysis:      # offline.analyzer.Analyzed, as connections end
        ...                             # report: report.offline_model.ConnectionReport
    analysis.summary                    # CaptureSummary: packets, warnings, counts

Module map: analyzer (the loop over capture events; a connection whose handshake is over
is handed back to the capture layer, which then only counts its bytes), connection (one TCP
connection), framing (where records start: preambles, mid-stream, resync after gaps), fast
(the fast record/handshake reader), flowreader (the session.Flow reader: --msg trace,
decryption), decrypt (key log -> record protection), facts (what the messages said), hello
/ hello_codec (hello summaries, fast and by hello shape / from the codec), hello_fields
(extension bodies), messages (key exchange, certificates, tickets), build (facts ->
report), fingerprints (JA3, JA3S, JA4), quic (QUIC Initial packets), dtls (DTLS
handshakes), filters, stats.
"""

from tlsprobe.offline.analyzer import (
    Analyzed,
    AnalyzerOptions,
    CaptureAnalysis,
    analyze,
)

__all__ = ["Analyzed", "AnalyzerOptions", "CaptureAnalysis", "analyze"]
