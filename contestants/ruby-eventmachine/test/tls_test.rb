# frozen_string_literal: true

require "openssl"
require_relative "live_server"

# --tls-port (spec §12) through EM's start_tls, with a throwaway ECDSA P-256
# certificate made here, as serverlab makes one per run.
class TlsTest < Minitest::Test
  include LiveServerClient

  class << self
    # The certificate and key files, made once; [folder, cert path, key path].
    def material
      @material ||= begin
        folder = Dir.mktmpdir("ruby-em-tls")
        key = OpenSSL::PKey::EC.generate("prime256v1")
        cert = self_signed(key)
        File.write(File.join(folder, "cert.pem"), cert.to_pem)
        File.write(File.join(folder, "key.pem"), key.private_to_pem, perm: 0o600)
        Minitest.after_run { FileUtils.rm_rf(folder) }
        [File.join(folder, "cert.pem"), File.join(folder, "key.pem")]
      end
    end

    def tls_port
      @tls_port ||= TCPServer.open("127.0.0.1", 0) { |probe| probe.addr[1] }
    end

    private

    def self_signed(key)
      cert = OpenSSL::X509::Certificate.new
      cert.version = 2
      cert.serial = 1
      cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=localhost")
      cert.public_key = key
      cert.not_before = Time.now - 60
      cert.not_after = Time.now + 3600
      factory = OpenSSL::X509::ExtensionFactory.new(cert, cert)
      cert.add_extension(factory.create_extension("subjectAltName", "DNS:localhost,IP:127.0.0.1"))
      cert.sign(key, OpenSSL::Digest.new("SHA256"))
    end
  end

  def server
    cert, key = self.class.material
    LiveServer.with("--tls-port", self.class.tls_port.to_s, "--tls-cert", cert, "--tls-key", key)
  end

  # A client context trusting only the test's certificate; `configure` may
  # loosen it (older versions, other suites) so that a refusal is the server's.
  def client_context
    context = OpenSSL::SSL::SSLContext.new
    context.ca_file = self.class.material.first
    context.verify_mode = OpenSSL::SSL::VERIFY_PEER
    context.security_level = 0
    yield context if block_given?
    context
  end

  def tls_connect(context = client_context)
    server
    tcp = TCPSocket.new("127.0.0.1", self.class.tls_port)
    tls = OpenSSL::SSL::SSLSocket.new(tcp, context)
    tls.hostname = "127.0.0.1"
    tls.sync_close = true
    tls.connect
    tls
  rescue StandardError
    tcp&.close
    raise
  end

  # Everything until the server closes (Connection: close).
  def exchange(request, context = client_context)
    tls = tls_connect(context)
    tls.write(request)
    reply = +""
    loop { reply << tls.readpartial(65_536) }
  rescue EOFError, OpenSSL::SSL::SSLError
    reply
  ensure
    tls&.close
  end

  def test_https_serves_with_the_given_certificate_and_counts_in_stats
    before = stats["connections"]["total"]
    tls = tls_connect
    assert_equal File.read(self.class.material.first), tls.peer_cert.to_pem
    tls.write("GET /perf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200 OK\r\n}, tls.readpartial(65_536))
    assert_equal before + 2, stats["connections"]["total"], "the TLS connection and this /stats one"
  ensure
    tls&.close
  end

  def test_tls_12_and_13_are_accepted_with_aead_suites_only
    [OpenSSL::SSL::TLS1_2_VERSION, OpenSSL::SSL::TLS1_3_VERSION].each do |version|
      tls = tls_connect(client_context { |context| context.min_version = context.max_version = version })
      assert_match(/GCM|CHACHA20/, tls.cipher.first, "version #{version}")
      tls.close
    end
  end

  # The same loosened client is refused by the server, not by itself: the
  # TLS 1.2 AEAD handshake above succeeds with security level 0 too.
  def test_tls_11_and_cbc_suites_are_refused
    old = client_context { |context| context.min_version = context.max_version = OpenSSL::SSL::TLS1_1_VERSION }
    assert_raises(OpenSSL::SSL::SSLError, Errno::ECONNRESET) { tls_connect(old) }
    cbc = client_context do |context|
      context.max_version = OpenSSL::SSL::TLS1_2_VERSION
      context.ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384"
    end
    assert_raises(OpenSSL::SSL::SSLError, Errno::ECONNRESET) { tls_connect(cbc) }
  end

  # A push delivery over TLS cannot be written to the descriptor directly
  # (HttpConnection#write_now): it must arrive encrypted, every line of it.
  def test_comet_lines_arrive_over_tls
    event = fresh_event("tls")
    post_json("/event/set", "name" => event, "interval_ms" => 30)
    body = JSON.generate("type" => "comet", "events" => [event], "duration_ms" => 300)
    reply = exchange("POST /push HTTP/1.1\r\nContent-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
    post_json("/event/clear", "name" => event)
    lines = reply.split("\r\n").select { |line| line.start_with?("{") }.map { |line| JSON.parse(line) }
    seqs = lines.filter_map { |line| line.dig("response", "event", "seq") }
    assert_operator seqs.size, :>=, 3
    assert_equal (seqs.first..seqs.last).to_a, seqs
    assert_equal({ "timeout" => true }, lines.last["response"])
  end
end
