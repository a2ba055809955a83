# frozen_string_literal: true

require_relative "tls_material"

# --tls-port (spec §12) through EM's start_tls, with a throwaway ECDSA P-256
# certificate made here, as serverlab makes one per run.
class TlsTest < Minitest::Test
  include LiveServerClient
  include TlsMaterial

  def server
    cert, key = TlsMaterial.files
    LiveServer.with("--tls-port", tls_port.to_s, "--tls-cert", cert, "--tls-key", key)
  end

  def tls_port
    TlsMaterial.port(:https)
  end

  # Everything until the server closes (Connection: close).
  def exchange(request, context = client_context)
    tls = tls_connect(tls_port, context)
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
    tls = tls_connect(tls_port)
    assert_equal File.read(TlsMaterial.files.first), tls.peer_cert.to_pem
    tls.write("GET /perf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200 OK\r\n}, tls.readpartial(65_536))
    assert_equal before + 2, stats["connections"]["total"], "the TLS connection and this /stats one"
  ensure
    tls&.close
  end

  def test_tls_12_and_13_are_accepted_with_aead_suites_only
    [OpenSSL::SSL::TLS1_2_VERSION, OpenSSL::SSL::TLS1_3_VERSION].each do |version|
      tls = tls_connect(tls_port, client_context { |context| context.min_version = context.max_version = version })
      assert_match(/GCM|CHACHA20/, tls.cipher.first, "version #{version}")
      tls.close
    end
  end

  # The same loosened client is refused by the server, not by itself: the
  # TLS 1.2 AEAD handshake above succeeds with security level 0 too.
  def test_tls_11_and_cbc_suites_are_refused
    old = client_context { |context| context.min_version = context.max_version = OpenSSL::SSL::TLS1_1_VERSION }
    assert_raises(OpenSSL::SSL::SSLError, Errno::ECONNRESET) { tls_connect(tls_port, old) }
    cbc = client_context do |context|
      context.max_version = OpenSSL::SSL::TLS1_2_VERSION
      context.ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384"
    end
    assert_raises(OpenSSL::SSL::SSLError, Errno::ECONNRESET) { tls_connect(tls_port, cbc) }
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
