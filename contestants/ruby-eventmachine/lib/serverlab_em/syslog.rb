# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # Splits a syslog TCP byte stream into messages (RFC 6587): a frame that
  # starts with 1-9 is octet-counted ("LEN SP MSG"), anything else ends at
  # "\n". Each message is yielded as (length, buffer, start), never copied
  # out of the buffer here: counting needs only its length. RFC 5425 (syslog
  # over TLS) knows octet counting only: octet_counted_only refuses the rest.
  class SyslogFramer
    MAX_LENGTH_DIGITS = 10
    # A newline-framed message longer than this is not syslog; the caller
    # drops the connection rather than buffer without bound.
    MAX_PENDING = 1024 * 1024
    MAX_OCTET_COUNTED = 16 * 1024 * 1024
    NEWLINE = "\n"
    SPACE = 0x20
    DIGIT_ONE = 0x31
    DIGIT_NINE = 0x39
    DIGIT_ZERO = 0x30

    class Overflow < StandardError; end
    # Where RFC 5425 wants a MSG-LEN there is none (0, a leading zero, too
    # many digits, no digit): the framing is lost, so is the connection.
    class Unframed < Overflow; end

    def initialize(octet_counted_only: false, &on_message)
      @on_message = on_message
      @octet_counted_only = octet_counted_only
      @buffer = String.new(encoding: Encoding::BINARY)
    end

    def feed(data)
      @buffer = if !@buffer.empty? then @buffer << data
                elsif data.frozen? then data.b
                else data.force_encoding(Encoding::BINARY)
                end
      position = 0
      size = @buffer.bytesize
      while position < size
        consumed = take_frame(position, size)
        break unless consumed

        position = consumed
      end
      keep_from(position, size)
    end

    private

    # Returns the position after one complete frame, or nil if it is incomplete.
    def take_frame(position, size)
      first = @buffer.getbyte(position)
      if first >= DIGIT_ONE && first <= DIGIT_NINE
        octet_counted_end = take_octet_counted(position, size)
        return octet_counted_end unless octet_counted_end == :not_octet_counted
      end
      raise Unframed if @octet_counted_only

      take_newline_framed(position)
    end

    def take_octet_counted(position, size)
      digits_end = position + 1
      digits_end += 1 while digits_end < size && digit?(@buffer.getbyte(digits_end))
      digit_count = digits_end - position
      return :not_octet_counted if digit_count > MAX_LENGTH_DIGITS
      return nil if digits_end == size
      return :not_octet_counted unless @buffer.getbyte(digits_end) == SPACE

      length = @buffer.byteslice(position, digit_count).to_i
      raise Overflow if length > MAX_OCTET_COUNTED

      message_end = digits_end + 1 + length
      return nil if message_end > size

      @on_message.call(length, @buffer, digits_end + 1)
      message_end
    end

    def take_newline_framed(position)
      newline = @buffer.index(NEWLINE, position)
      return nil unless newline

      length = newline - position
      @on_message.call(length, @buffer, position) if length.positive?
      newline + 1
    end

    def digit?(byte)
      byte >= DIGIT_ZERO && byte <= DIGIT_NINE
    end

    def keep_from(position, size)
      if position >= size
        @buffer = String.new(encoding: Encoding::BINARY)
      elsif position.positive?
        @buffer = @buffer.byteslice(position, size - position)
      end
      raise Overflow if @buffer.bytesize > MAX_PENDING && !@buffer.getbyte(0).between?(DIGIT_ONE, DIGIT_NINE)
    end
  end

  # What happens to each complete message (spec §7, §7.1): counted, and in
  # `parse` mode parsed too; the mode is fixed when the server starts.
  class SyslogReceiver
    MODES = %w[count parse].freeze

    attr_reader :stats

    def initialize(stats, mode)
      @stats = stats
      @parser = mode == "parse" ? SyslogParse.new : nil
      stats.syslog_mode = mode
    end

    def message(size, buffer, start)
      @stats.count_syslog_message(size)
      return unless @parser

      text = start.zero? && size == buffer.bytesize ? buffer : buffer.byteslice(start, size)
      msg_bytes = @parser.parse(text)
      @stats.count_parsed_syslog(msg_bytes && @parser, msg_bytes)
    end
  end

  # One syslog TCP client.
  class SyslogTcpConnection < EM::Connection
    def initialize(receiver)
      super()
      @receiver = receiver
    end

    def post_init
      @receiver.stats.syslog_tcp_connections += 1
      @framer = SyslogFramer.new(octet_counted_only: octet_counted_only?) do |size, buffer, start|
        @receiver.message(size, buffer, start)
      end
    end

    # After a broken frame nothing more is read: EM may still hand over what
    # it read before the close takes effect.
    def receive_data(data)
      @framer&.feed(data)
    rescue SyslogFramer::Overflow
      @framer = nil
      close_connection
    end

    def octet_counted_only?
      false
    end
  end

  # One RFC 5425 client on --syslog-tls-port: Ruby's openssl through
  # TlsTransport (the HTTPS port's versions and suites, no ALPN), then
  # octet-counted frames only, counted (and parsed in parse mode) as the
  # cleartext TCP ones.
  class SyslogTlsConnection < SyslogTcpConnection
    include TlsTransport

    def octet_counted_only?
      true
    end
  end

  # The syslog UDP socket: one message per datagram.
  class SyslogUdpHandler < EM::Connection
    NEWLINE_BYTE = 0x0a
    # A deeper kernel queue rides out bursts while the reactor is busy
    # elsewhere; the kernel caps it at net.core.rmem_max.
    RECEIVE_BUFFER_BYTES = 8 * 1024 * 1024

    def initialize(receiver)
      super()
      @receiver = receiver
    end

    def post_init
      set_sock_opt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    end

    def receive_data(datagram)
      size = datagram.bytesize
      size -= 1 if size.positive? && datagram.getbyte(size - 1) == NEWLINE_BYTE
      @receiver.message(size, datagram.force_encoding(Encoding::BINARY), 0) if size.positive?
    end
  end
end
