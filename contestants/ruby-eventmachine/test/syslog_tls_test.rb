# frozen_string_literal: true

require_relative "tls_material"

# --syslog-tls-port (spec §15, RFC 5425): TLS, then octet-counted
# frames only, counted (and here parsed) as the cleartext TCP ones. Each
# SSLSocket#write is one TLS record, so frames are split across records.
class SyslogTlsTest < Minitest::Test
  include LiveServerClient
  include TlsMaterial

  MESSAGE = "<14>1 - host app - - - over tls"
  FRAME = "#{MESSAGE.bytesize} #{MESSAGE}".freeze

  def server
    cert, key = TlsMaterial.files
    LiveServer.with("--syslog-tls-port", syslog_tls_port.to_s, "--tls-cert", cert, "--tls-key", key, "--syslog-mode", "parse")
  end

  def syslog_tls_port
    TlsMaterial.port(:syslog_tls)
  end

  def counts
    stats["syslog"].values_at("received", "bytes", "parsed")
  end

  # Sends the records, then waits for the server's close (true) or 2 s (false).
  def send_records(records)
    tls = tls_connect(syslog_tls_port)
    records.each { |record| tls.write(record) }
    closed_within?(tls, 2)
  rescue OpenSSL::SSL::SSLError, Errno::ECONNRESET, EOFError
    true
  ensure
    tls&.close
  end

  # TLS 1.3 session tickets arrive after the handshake, so a readable socket
  # is not yet a closed one: read until the end or the deadline.
  def closed_within?(tls, seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    while (left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)).positive?
      return false unless tls.io.wait_readable(left)
      return true if tls.read_nonblock(4096, exception: false).nil?
    end
    false
  end

  # Counted while the connection is still open: closing on the server's
  # unread TLS 1.3 session tickets would send a reset, which can discard
  # records the server has not read yet.
  def test_frames_in_one_record_and_across_records_are_counted_once_each
    before = counts
    tls = tls_connect(syslog_tls_port)
    ["#{FRAME}#{FRAME}", FRAME[0, 1], "#{FRAME[1..]}#{FRAME[0, 10]}", FRAME[10..], "40 <14>1 not complete"].each { |record| tls.write(record) }
    expected = [before[0] + 4, before[1] + 4 * MESSAGE.bytesize, before[2] + 4]
    assert_equal expected, eventually { (now = counts) == expected ? now : nil } || counts
  ensure
    tls&.close
  end

  def test_a_bad_msg_len_closes_the_connection_after_counting_the_frames_before_it
    ["0 #{MESSAGE}", "0#{FRAME}", "18446744073709551617 #{MESSAGE}", "#{MESSAGE}\n"].each do |bad|
      before = counts[0]
      closed = send_records([FRAME, "#{bad}#{FRAME}"])
      assert closed, "#{bad.inspect}: the connection stayed open"
      assert_equal before + 1, counts[0], bad.inspect
    end
  end

  def test_plaintext_on_the_syslog_tls_port_is_never_counted
    before = counts[0]
    TCPSocket.open("127.0.0.1", syslog_tls_port) do |socket|
      socket.write("#{FRAME}\n")
      assert socket.wait_readable(2), "the server kept a plaintext connection open"
    end
    assert_equal before, counts[0]
  end

  # RFC 5425 §4.4: the client's close_notify is answered with the server's
  # (SSLSocket#stop is the client's SSL_shutdown without closing).
  def test_a_client_close_notify_is_answered_with_the_servers
    tls = tls_connect(syslog_tls_port)
    tls.write(FRAME)
    tls.__send__(:stop)
    # An end of stream without an SSLError ("unexpected eof") is a close_notify.
    assert closed_within?(tls, 2), "no close_notify within 2 s of the client's"
  ensure
    tls&.close
  end
end
