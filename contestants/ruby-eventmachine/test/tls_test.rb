# frozen_string_literal: true

require_relative "tls_material"

# --tls-port (spec §12) through Ruby's openssl on EM-watched sockets, with a
# throwaway ECDSA P-256 certificate made here, as serverlab makes one per run.
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
    read_to_end(tls).first
  ensure
    tls&.close
  end

  # [bytes, how the stream ended]: EOFError after the server's close_notify;
  # OpenSSL 3 raises SSLError ("unexpected eof") on a bare FIN.
  def read_to_end(tls)
    reply = String.new(encoding: Encoding::BINARY)
    loop { reply << tls.readpartial(65_536) }
  rescue EOFError, OpenSSL::SSL::SSLError => e
    [reply, e.class]
  end

  def only(version)
    client_context { |context| context.min_version = context.max_version = version }
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

  # A client can tell a complete answer from a cut one (RFC 8446 §6.1).
  def test_a_connection_close_answer_ends_with_close_notify_in_tls_12_and_13
    [OpenSSL::SSL::TLS1_2_VERSION, OpenSSL::SSL::TLS1_3_VERSION].each do |version|
      tls = tls_connect(tls_port, only(version))
      tls.write("GET /perf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      reply, ending = read_to_end(tls)
      assert_match(%r{\AHTTP/1.1 200 OK\r\n}, reply)
      assert_equal EOFError, ending, "TLS version #{version}: closed without close_notify"
      tls.close
    end
  end

  # 3 MB through a client that reads late: the writes the kernel refuses
  # wait in the transport and follow, in order, when the socket drains.
  def test_a_large_file_arrives_whole_over_tls_to_a_slow_reader
    tls = tls_connect(tls_port)
    tls.write("GET /files/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    sleep 0.5
    reply, ending = read_to_end(tls)
    assert_equal EOFError, ending
    assert_equal File.binread(File.join(server.docroot, "big.bin")), reply.split("\r\n\r\n", 2).last
  ensure
    tls&.close
  end

  def test_alpn_selects_http_11_and_never_a_protocol_the_client_did_not_offer
    tls = tls_connect(tls_port, client_context { |context| context.alpn_protocols = %w[h2 http/1.1] })
    assert_equal "http/1.1", tls.alpn_protocol
    tls.close
    assert_raises(OpenSSL::SSL::SSLError) { tls_connect(tls_port, client_context { |context| context.alpn_protocols = %w[h2] }) }
    assert_nil tls_connect(tls_port).tap(&:close).alpn_protocol, "no ALPN offered, none answered"
  end

  # One context per port: TLS 1.2 and TLS 1.3 sessions resume on a new
  # connection. A TLS 1.3 ticket comes after the handshake, so one exchange
  # is read before the session is taken.
  def test_sessions_resume_in_tls_12_and_13
    [OpenSSL::SSL::TLS1_2_VERSION, OpenSSL::SSL::TLS1_3_VERSION].each do |version|
      context = only(version)
      first = tls_connect(tls_port, context)
      first.write("GET /perf HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      read_to_end(first)
      second = resumed_connect(context, first.session)
      assert second.session_reused?, "TLS version #{version}"
      [first, second].each(&:close)
    end
  end

  def resumed_connect(context, session)
    tcp = TCPSocket.new("127.0.0.1", tls_port)
    tls = OpenSSL::SSL::SSLSocket.new(tcp, context)
    tls.sync_close = true
    tls.session = session
    tls.connect
  end
end
