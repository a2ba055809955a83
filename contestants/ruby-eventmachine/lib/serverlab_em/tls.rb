# frozen_string_literal: true

require "eventmachine"
require "openssl"
require "socket"

module ServerlabEM
  # TLS (spec §12, and RFC 5425 for syslog) of Ruby's own `openssl`, driven
  # by the reactor. EM's start_tls cannot send close_notify, answer ALPN or
  # resume a session (README, "TLS"), so the TLS ports are not EM servers:
  # Ruby accepts on them (TlsListener) and EM only watches the descriptors
  # (EM.watch), telling TlsTransport when one is readable or writable; every
  # OpenSSL call is a non-blocking one on the reactor thread.
  module Tls
    # TLS 1.3's suites are all AEAD; for TLS 1.2 only ECDHE with AES-GCM or
    # ChaCha20-Poly1305 (ECDSA or RSA keys alike).
    CIPHERS_TLS12 = "ECDHE+AESGCM:ECDHE+CHACHA20"
    HTTP11 = "http/1.1"

    # One context per port, shared by its connections, so that its session
    # cache (TLS 1.2 session ids) and ticket key (TLS 1.2 and 1.3 tickets)
    # resume sessions across connections. alpn: answer ALPN with http/1.1
    # (the HTTPS port); RFC 5425 syslog has no ALPN.
    def self.context(cert:, key:, alpn:)
      context = OpenSSL::SSL::SSLContext.new
      context.min_version = OpenSSL::SSL::TLS1_2_VERSION
      context.max_version = OpenSSL::SSL::TLS1_3_VERSION
      context.ciphers = CIPHERS_TLS12
      chain = certificates(cert)
      context.add_certificate(chain.first, OpenSSL::PKey.read(File.read(key)), chain.drop(1))
      context.session_id_context = "serverlab-em"
      context.alpn_select_cb = method(:select_alpn) if alpn
      context
    end

    # Never a protocol the client did not offer (RFC 7301 §3.2): a client
    # offering only others gets the no_application_protocol alert, which
    # OpenSSL sends when the callback raises.
    def self.select_alpn(offered)
      raise OpenSSL::SSL::SSLError, "no protocol of #{offered.inspect} is served" unless offered.include?(HTTP11)

      HTTP11
    end

    def self.certificates(path)
      pems = File.read(path).scan(/-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----/m)
      raise OpenSSL::X509::CertificateError, "#{path} holds no PEM certificate" if pems.empty?

      pems.map { |pem| OpenSSL::X509::Certificate.new(pem) }
    end
  end

  # A TLS listening socket, watched by EM: each readable turn accepts what
  # waits (accept_nonblock) and hands every client to EM.watch as a
  # connection of the handler class, which includes TlsTransport.
  class TlsListener < EM::Connection
    ACCEPTS_PER_TURN = 64

    def self.watch(socket, context, handler, *args)
      EM.watch(socket, self, socket, context, handler, args) { |listener| listener.notify_readable = true }
    end

    def initialize(socket, context, handler, args)
      super()
      @socket = socket
      @context = context
      @handler = handler
      @args = args
    end

    def notify_readable
      ACCEPTS_PER_TURN.times do
        client, = @socket.accept_nonblock(exception: false)
        return if client == :wait_readable

        EM.watch(client, @handler, *@args) { |connection| connection.start_tls_transport(client, @context) }
      end
    rescue SystemCallError => e
      warn("ruby-eventmachine: accept on a TLS port: #{e.message}") # out of descriptors: EM's own acceptor drops too
    end
  end

  # The transport of a watched TLS connection, for an EM::Connection subclass
  # whose receive_data takes plaintext: it replaces EM's send_data,
  # close_connection and outbound size with their TLS counterparts, so the
  # cleartext code above it runs unchanged. Writes are made at once (one
  # SSL_write per send_data), so a push delivery's `sent` stamp is the moment
  # of its write as on cleartext (HttpConnection#write_now); what the kernel
  # does not take waits here, in order, until the descriptor is writable.
  module TlsTransport
    READ_BYTES = 16_384
    # A fast client could keep one connection reading forever; after this
    # many records the rest waits a turn, so everyone else is served.
    READS_PER_TURN = 16

    def start_tls_transport(io, context)
      @tls_io = io
      @tls = OpenSSL::SSL::SSLSocket.new(io, context)
      @tls_state = :handshake
      @tls_out = String.new(encoding: Encoding::BINARY)
      @tls_want_write = false
      self.notify_readable = true
      tls_handshake
    end

    def notify_readable
      @tls_state == :handshake ? tls_handshake : tls_read
    end

    def notify_writable
      return tls_handshake if @tls_state == :handshake

      tls_flush
      tls_read if @tls_read_wants_write
    end

    def send_data(data)
      return unless tls_open?

      @tls_out << data
      tls_flush
    end

    def write_now(data)
      send_data(data)
    end

    def get_outbound_data_size
      @tls_out.bytesize
    end

    # after_writing: once every byte handed over is written; either way the
    # close_notify alert goes before the TCP close (spec §12).
    def close_connection(after_writing = false)
      return unless tls_open?
      return @tls_close_pending = true if after_writing && !@tls_out.empty?

      tls_close
    end

    def close_connection_after_writing
      close_connection(true)
    end

    # EM calls this once the descriptor is detached (or at its own stop).
    def unbind
      tls_release
      super
    end

    private

    def tls_open?
      @tls_state == :open || @tls_state == :closing
    end

    def tls_handshake
      case @tls.accept_nonblock(exception: false)
      when :wait_readable then tls_want_write(false)
      when :wait_writable then tls_want_write(true)
      else tls_established
      end
    rescue StandardError # SSLError, an ALPN refusal, a reset: the alert (if any) is sent
      tls_abort
    end

    def tls_established
      @tls_state = :open
      tls_want_write(false)
      tls_read # the client's first records may have come with its Finished
    end

    def tls_read
      @tls_read_wants_write = false
      READS_PER_TURN.times do
        data = @tls.read_nonblock(READ_BYTES, exception: false)
        return if data == :wait_readable
        return tls_read_wants_write if data == :wait_writable
        return close_connection if data.nil? # the client's close_notify: answered with ours

        receive_data(data)
        return unless tls_open?
      end
      EM.next_tick { tls_read if tls_open? } # OpenSSL may hold decrypted bytes the kernel no longer signals
    rescue OpenSSL::SSL::SSLError, SystemCallError, IOError
      tls_abort # a cut connection (FIN without close_notify, reset) or a broken record
    end

    def tls_read_wants_write
      @tls_read_wants_write = true
      tls_want_write(true)
    end

    def tls_flush
      until @tls_out.empty?
        written = @tls.write_nonblock(@tls_out, exception: false)
        return tls_want_write(true) if written.is_a?(Symbol)

        @tls_out = @tls_out.byteslice(written, @tls_out.bytesize - written)
      end
      tls_want_write(false)
      tls_close if @tls_close_pending
    rescue OpenSSL::SSL::SSLError, SystemCallError, IOError
      tls_abort
    end

    def tls_want_write(wanted)
      return if @tls_want_write == wanted || @tls_state == :closed

      @tls_want_write = wanted
      self.notify_writable = wanted
    end

    # close_notify (SSL_shutdown without waiting for the client's), then the
    # TCP close.
    def tls_close
      @tls.sysclose # SSL_shutdown once; the socket stays open (sync_close is false)
      tls_abort
    rescue OpenSSL::SSL::SSLError, SystemCallError, IOError
      tls_abort
    end

    def tls_abort
      return if @tls_state == :closed

      @tls_state = :closed
      @tls_out = String.new(encoding: Encoding::BINARY)
      detach
      tls_release
    end

    def tls_release
      @tls_state = :closed
      @tls_io.close unless @tls_io.nil? || @tls_io.closed?
    end
  end

  # An HTTP connection on {tls_port}: the same state machine as cleartext,
  # over TlsTransport.
  class TlsHttpConnection < HttpConnection
    include TlsTransport
  end
end
