"""RFC 8448 section 3 ("Simple 1-RTT Handshake") values, transcribed from the RFC.

Cross-checked sources: tlslite-ng 0.8.2 unit_tests/test_tls1_3_vectors.py (hello messages,
secrets, keys) and the RFC's record dumps as quoted by several TLS test suites. The
encrypted records authenticate under AES-GCM, so a transcription error cannot pass.
"""

from __future__ import annotations


def h(text: str) -> bytes:
    """Hex in the RFC's spaced layout to bytes."""
    return bytes.fromhex("".join(text.split()))


CLIENT_X25519_PRIVATE = h("49af42ba7f7994852d713ef2784bcbcaa7911de26adc5642cb634540e7ea5005")
CLIENT_X25519_PUBLIC = h("99381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529aaf2c")
SERVER_X25519_PUBLIC = h("c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f")

CLIENT_HELLO = h("""
    010000c00303cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece70000061301
    13031302010000910000000b0009000006736572766572ff01000100000a00140012001d00170018001901
    00010101020103010400230000003300260024001d002099381de560e4bd43d23d8e435a7dbafeb3c06e51
    c13cae4d5413691e529aaf2c002b0003020304000d0020001e0403050306030203080408050806040105
    01060102010402050206020202002d00020101001c00024001""")
SERVER_HELLO = h("""
    020000560303a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e269280013010000
    2e00330024001d0020c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f002b
    00020304""")
ENCRYPTED_EXTENSIONS = h("""
    080000240022000a00140012001d00170018001901000101010201030104001c0002400100000000""")
CERTIFICATE_VERIFY_PREFIX = h("0f000084080400805a747c5d88fa9bd2")

SHARED_SECRET = h("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d")
EARLY_SECRET = h("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")
DERIVED_FOR_HANDSHAKE = h("6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba")
HANDSHAKE_SECRET = h("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")
CLIENT_HS_TRAFFIC = h("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
SERVER_HS_TRAFFIC = h("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
DERIVED_FOR_MASTER = h("43de77e0c77713859a944db9db2590b53190a65b3ee2e4f12dd7a0bb7ce254b4")
MASTER_SECRET = h("18df06843d13a08bf2a449844c5f8a478001bc4d4c627984d5a41da8d0402919")
SERVER_HS_KEY = h("3fce516009c21727d0f2e4e86ee403bc")
SERVER_HS_IV = h("5d313eb2671276ee13000b30")
CLIENT_HS_KEY = h("dbfaa693d1762c5b666af5d950258d01")
CLIENT_HS_IV = h("5bd3c71b836e0b76bb73265f")
SERVER_FINISHED_KEY = h("008d3b66f816ea559f96b537e885c31fc068bf492c652f01f288a1d8cdc19fc8")
SERVER_FINISHED_VERIFY_DATA = h(
    "9b9b141d906337fbd2cbdce71df4deda4ab42c309572cb7fffee5454b78f0718")
CLIENT_AP_TRAFFIC = h("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")
SERVER_AP_TRAFFIC = h("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")
EXPORTER_MASTER = h("fe22f881176eda18eb8f44529e6792c50c9a3f89452f68d8ae311b4309d3cf50")
SERVER_AP_KEY = h("9f02283b6c9c07efc26bb9f2ac92e356")
SERVER_AP_IV = h("cf782b88dd83549aadf1e984")
CLIENT_AP_KEY = h("17422dda596ed5d9acd890e3c63f5051")
CLIENT_AP_IV = h("5b78923dee08579033e523d9")
CLIENT_FINISHED_VERIFY_DATA = h(
    "a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61")
CLIENT_FINISHED_TRANSCRIPT_HASH = h(
    "209145a96ee8e2a122ff810047cc952684658d6049e86429426db87c54ad143d")
RESUMPTION_MASTER = h("7df235f2031d2a051287d02b0241b0bfdaf86cc856231f2d5aba46c434ec196c")
# "tls13 resumption" with ticket_nonce 00 00
RESUMPTION_PSK = h("4ecd0eb6ec3b4d87f5d6028f922ca4c5851a277fd41311c9e62d2c9492e1c4f3")

# {server} send handshake record: EncryptedExtensions, Certificate, CertificateVerify,
# Finished under the server handshake key, sequence 0.
SERVER_HANDSHAKE_RECORD = h("""
    17 03 03 02 a2 d1 ff 33 4a 56 f5 bf f6 59 4a 07
    cc 87 b5 80 23 3f 50 0f 45 e4 89 e7 f3 3a f3 5e
    df 78 69 fc f4 0a a4 0a a2 b8 ea 73 f8 48 a7 ca
    07 61 2e f9 f9 45 cb 96 0b 40 68 90 51 23 ea 78
    b1 11 b4 29 ba 91 91 cd 05 d2 a3 89 28 0f 52 61
    34 aa dc 7f c7 8c 4b 72 9d f8 28 b5 ec f7 b1 3b
    d9 ae fb 0e 57 f2 71 58 5b 8e a9 bb 35 5c 7c 79
    02 07 16 cf b9 b1 18 3e f3 ab 20 e3 7d 57 a6 b9
    d7 47 76 09 ae e6 e1 22 a4 cf 51 42 73 25 25 0c
    7d 0e 50 92 89 44 4c 9b 3a 64 8f 1d 71 03 5d 2e
    d6 5b 0e 3c dd 0c ba e8 bf 2d 0b 22 78 12 cb b3
    60 98 72 55 cc 74 41 10 c4 53 ba a4 fc d6 10 92
    8d 80 98 10 e4 b7 ed 1a 8f d9 91 f0 6a a6 24 82
    04 79 7e 36 a6 a7 3b 70 a2 55 9c 09 ea d6 86 94
    5b a2 46 ab 66 e5 ed d8 04 4b 4c 6d e3 fc f2 a8
    94 41 ac 66 27 2f d8 fb 33 0e f8 19 05 79 b3 68
    45 96 c9 60 bd 59 6e ea 52 0a 56 a8 d6 50 f5 63
    aa d2 74 09 96 0d ca 63 d3 e6 88 61 1e a5 e2 2f
    44 15 cf 95 38 d5 1a 20 0c 27 03 42 72 96 8a 26
    4e d6 54 0c 84 83 8d 89 f7 2c 24 46 1a ad 6d 26
    f5 9e ca ba 9a cb bb 31 7b 66 d9 02 f4 f2 92 a3
    6a c1 b6 39 c6 37 ce 34 31 17 b6 59 62 22 45 31
    7b 49 ee da 0c 62 58 f1 00 d7 d9 61 ff b1 38 64
    7e 92 ea 33 0f ae ea 6d fa 31 c7 a8 4d c3 bd 7e
    1b 7a 6c 71 78 af 36 87 90 18 e3 f2 52 10 7f 24
    3d 24 3d c7 33 9d 56 84 c8 b0 37 8b f3 02 44 da
    8c 87 c8 43 f5 e5 6e b4 c5 e8 28 0a 2b 48 05 2c
    f9 3b 16 49 9a 66 db 7c ca 71 e4 59 94 26 f7 d4
    61 e6 6f 99 88 2b d8 9f c5 08 00 be cc a6 2d 6c
    74 11 6d bd 29 72 fd a1 fa 80 f8 5d f8 81 ed be
    5a 37 66 89 36 b3 35 58 3b 59 91 86 dc 5c 69 18
    a3 96 fa 48 a1 81 d6 b6 fa 4f 9d 62 d5 13 af bb
    99 2f 2b 99 2f 67 f8 af e6 7f 76 91 3f a3 88 cb
    56 30 c8 ca 01 e0 c6 5d 11 c6 6a 1e 2a c4 c8 59
    77 b7 c7 a6 99 9b bf 10 dc 35 ae 69 f5 51 56 14
    63 6c 0b 9b 68 c1 9e d2 e3 1c 0b 3b 66 76 30 38
    eb ba 42 f3 b3 8e dc 03 99 f3 a9 f2 3f aa 63 97
    8c 31 7f c9 fa 66 a7 3f 60 f0 50 4d e9 3b 5b 84
    5e 27 55 92 c1 23 35 ee 34 0b bc 4f dd d5 02 78
    40 16 e4 b3 be 7e f0 4d da 49 f4 b4 40 a3 0c b5
    d2 af 93 98 28 fd 4a e3 79 4e 44 f9 4d f5 a6 31
    ed e4 2c 17 19 bf da bf 02 53 fe 51 75 be 89 8e
    75 0e dc 53 37 0d 2b""")

# {client} send handshake record: client Finished under the client handshake key, seq 0.
CLIENT_FINISHED_RECORD = h("""
    17 03 03 00 35 75 ec 4d c2 38 cc e6 0b 29 80 44 a7 1e 21 9c
    56 cc 77 b0 51 7f e9 b9 3c 7a 4b fc 44 d8 7f 38 f8 03 38 ac
    98 fc 46 de b3 84 bd 1c ae ac ab 68 67 d7 26 c4 05 46""")

# application_data 00 01 02 ... 31 (50 bytes) each way.
APPLICATION_PAYLOAD = bytes(range(0x32))
CLIENT_APPLICATION_RECORD = h("""
    17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55
    cb ef ac ea 42 f9 14 aa 66 bc ab 3f 2b 98 19 a8 a5 b4 6b 39
    5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62 92 a2 97 70 14 bd
    1e 3d ea e6 3a ee bb 21 69 49 15 e4""")
# The server's first record under its application key is a NewSessionTicket (seq 0),
# so its application data goes out at sequence 1.
SERVER_APPLICATION_RECORD = h("""
    17 03 03 00 43 2e 93 7e 11 ef 4a c7 40 e5 38 ad 36 00 5f c4
    a4 69 32 fc 32 25 d0 5f 82 aa 1b 36 e3 0e fa f9 7d 90 e6 df
    fc 60 2d cb 50 1a 59 a8 fc c4 9c 4b f2 e5 f0 a2 1c 00 47 c2
    ab f3 32 54 0d d0 32 e1 67 c2 95 5d""")
SERVER_APPLICATION_SEQ = 1
