# frozen_string_literal: true

require "minitest/autorun"
require_relative "../lib/serverlab_em"

# Byte-stream framing must not depend on where TCP splits the stream, so every
# case is also fed one byte at a time.
class SyslogFramerTest < Minitest::Test
  def frame_sizes(stream, step)
    sizes = []
    framer = ServerlabEM::SyslogFramer.new { |size| sizes << size }
    stream.b.each_char.each_slice(step) { |piece| framer.feed(+piece.join) }
    sizes
  end

  def test_mixed_framing_split_anywhere
    message = "<14>1 - host app - - - seq=1 hi"
    stream = "#{message}\n#{message.bytesize} #{message}#{message}\n\n\n"
    [1, 2, 7, stream.bytesize].each do |step|
      assert_equal [message.bytesize] * 3, frame_sizes(stream, step), "step #{step}"
    end
  end

  def test_octet_counted_message_may_contain_newlines
    assert_equal [5], frame_sizes("5 a\nb\nc", 1)
  end

  def test_incomplete_frames_are_not_counted
    assert_equal [], frame_sizes("12 short", 3)
    assert_equal [], frame_sizes("no newline yet", 3)
  end

  def test_digits_without_space_fall_back_to_newline_framing
    assert_equal [6], frame_sizes("123abc\n", 1)
  end

  def test_oversized_newline_frame_is_refused
    framer = ServerlabEM::SyslogFramer.new { |_size| flunk "nothing is complete" }
    assert_raises(ServerlabEM::SyslogFramer::Overflow) { framer.feed("<" * (ServerlabEM::SyslogFramer::MAX_PENDING + 1)) }
  end
end

class ChunkedBodyTest < Minitest::Test
  class Collector
    attr_reader :data

    def initialize
      @data = +""
    end

    def write(bytes)
      @data << bytes
    end
  end

  def decode(stream, step)
    sink = Collector.new
    body = ServerlabEM::ChunkedBody.new(sink)
    leftover = nil
    stream.b.each_char.each_slice(step) do |piece|
      assert_nil leftover, "no input after the end"
      leftover = body.feed(+piece.join)
    end
    [sink.data, leftover]
  end

  def test_chunks_extensions_and_trailers_split_anywhere
    stream = "5;name=x\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
    [1, 3, stream.bytesize].each do |step|
      data, leftover = decode(stream, step)
      assert_equal "hello 0123456789", data
      assert_equal "", leftover
    end
  end

  def test_returns_bytes_after_the_body
    _data, leftover = decode("1\r\na\r\n0\r\n\r\nGET /perf", 100)
    assert_equal "GET /perf", leftover
  end

  def test_malformed_size_is_an_error
    error = assert_raises(ServerlabEM::BodyError) { decode("zz\r\n", 10) }
    assert_equal 400, error.status
  end

  def test_missing_crlf_after_data_is_an_error
    assert_raises(ServerlabEM::BodyError) { decode("1\r\nab\r\n", 10) }
  end

  def test_extensions_follow_the_grammar
    legal = "5;name=value;flag;q=\"a \\\"b;c\" ; t = v\r\nhello\r\n006\r\n world\r\n0\r\n\r\n"
    assert_equal ["hello world", ""], decode(legal, 1)
    ["5;name=va\0lue\r\n", "5;a\rb\r\n", "5;a\nhello\r\n", "5;a b\r\n", "0x5\r\n", "5 \r\n",
     "10000000000000005\r\n", "0\r\nX: a\nb\r\n\r\n"].each do |bad|
      assert_raises(ServerlabEM::BodyError, bad.inspect) { decode("#{bad}hello\r\n0\r\n\r\n", 100) }
    end
  end
end

class FramingTest < Minitest::Test
  def framing(fields, http10: false)
    ServerlabEM::Framing.of("POST / HTTP/1.1\r\n#{fields}\r\n", http10)
  end

  def status(fields, **options)
    assert_raises(ServerlabEM::BodyError) { framing(fields, **options) }.status
  end

  def test_content_length_is_digits_and_one_value
    assert_equal 5, framing("Content-Length: 005\r\n").length
    assert_equal 5, framing("Content-Length: 5, 5\r\ncontent-length: 5\r\n").length
    ["+5", "-5", "0x5", "5 0", "", "5, 6", "18446744073709551621"].each do |bad|
      assert_equal 400, status("Content-Length: #{bad}\r\n"), bad
    end
    assert_equal 400, status("Content-Length: 5\r\nContent-Length: 6\r\n")
  end

  def test_transfer_encoding_is_one_list_ending_in_chunked
    assert framing("Transfer-Encoding: Chunked\r\n").chunked
    both = framing("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n")
    assert both.chunked && both.close
    ["chunked, gzip", "identity", "", "chunked, chunked"].each do |bad|
      assert_equal 400, status("Transfer-Encoding: #{bad}\r\n"), bad
    end
    assert_equal 400, status("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")
    assert_equal 501, status("Transfer-Encoding: x-foo, chunked\r\n")
    assert_equal 501, status("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")
    assert_equal 400, status("Transfer-Encoding: chunked\r\n", http10: true)
  end
end

class JsonSinkTest < Minitest::Test
  def test_refuses_past_64_kib_without_raising
    sink = ServerlabEM::JsonSink.new
    sink.write("x" * ServerlabEM::JsonSink::LIMIT)
    assert_nil sink.refusal
    sink.write("x")
    assert_equal 413, sink.refusal.status
  end
end
