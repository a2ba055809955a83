# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # TLS through EventMachine's own start_tls (spec §12): OpenSSL behind EM's
  # C++ reactor, fed through memory BIOs. What start_tls can be told is the
  # key and certificate files, the protocol versions and the TLS 1.2 cipher
  # list; nothing else of OpenSSL is reachable from Ruby (no ALPN, no session
  # cache or tickets across connections, no close_notify: see README).
  module Tls
    # TLS 1.2 and 1.3 only; TLS 1.3's suites are all AEAD, and for TLS 1.2
    # only ECDHE with AES-GCM or ChaCha20-Poly1305 (ECDSA or RSA keys alike).
    VERSIONS = %w[TLSv1_2 TLSv1_3].freeze
    CIPHERS_TLS12 = "ECDHE+AESGCM:ECDHE+CHACHA20"

    # The start_tls arguments for a server certificate and its key (PEM).
    def self.options(cert:, key:)
      { cert_chain_file: cert, private_key_file: key, ssl_version: VERSIONS, cipher_list: CIPHERS_TLS12 }
    end
  end

  # An HTTP connection on {tls_port}: the same state machine as cleartext,
  # behind start_tls.
  class TlsHttpConnection < HttpConnection
    def initialize(app, tls_options)
      super(app)
      @tls_options = tls_options
    end

    def post_init
      super
      start_tls(@tls_options)
    end

    # The descriptor carries TLS records, so a push delivery cannot be
    # written to it directly: it goes through EM, which encrypts it into one
    # record at once (SSL_write into the memory BIO) and writes the
    # ciphertext at the reactor's next turn.
    def write_now(data)
      send_data(data)
    end
  end
end
