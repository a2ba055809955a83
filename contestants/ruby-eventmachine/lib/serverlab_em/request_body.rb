# frozen_string_literal: true

require "digest"

module ServerlabEM
  # Raised while a request body is read; the connection answers with this
  # status and closes, because the framing can no longer be trusted.
  class BodyError < StandardError
    attr_reader :status

    def initialize(status, reason)
      super(reason)
      @status = status
    end
  end

  # Bodies that nobody reads (GET with a body, refused requests) are drained so
  # the connection stays in step with the client.
  class DiscardSink
    def write(_bytes); end

    def refusal; end
  end

  # JSON request bodies are small by contract; past the limit the bytes are
  # dropped and the sink reports a refusal, which the connection answers with
  # 413 at once. Writing never raises, so the body framing stays in step.
  class JsonSink
    LIMIT = 64 * 1024

    attr_reader :refusal

    def initialize
      @data = String.new(encoding: Encoding::BINARY)
      @refusal = nil
    end

    def write(bytes)
      return if @refusal

      if @data.bytesize + bytes.bytesize > LIMIT
        @refusal = BodyError.new(413, "json body over 64 kib")
        @data.clear
      else
        @data << bytes
      end
    end

    def text
      @data.dup.force_encoding(Encoding::UTF_8)
    end

    def empty?
      @data.empty?
    end
  end

  # Upload bodies are hashed as they arrive, so a 1 GiB upload never sits in memory.
  class DigestSink
    attr_reader :bytes

    def initialize
      @digest = Digest::SHA256.new
      @bytes = 0
    end

    def write(data)
      @digest.update(data)
      @bytes += data.bytesize
    end

    def refusal; end

    def hexdigest
      @digest.hexdigest
    end
  end

  # A Content-Length body: feed returns the bytes past its end once complete.
  class ContentLengthBody
    attr_writer :sink

    def initialize(length, sink)
      @remaining = length
      @sink = sink
    end

    def feed(data)
      if data.bytesize < @remaining
        @sink.write(data)
        @remaining -= data.bytesize
        return nil
      end
      @sink.write(data.byteslice(0, @remaining))
      leftover = data.byteslice(@remaining, data.bytesize - @remaining)
      @remaining = 0
      leftover
    end
  end

  # RFC 9112 §7.1 chunked transfer coding, decoded incrementally. feed returns
  # nil while more input is needed and the bytes past the body once it ends.
  class ChunkedBody
    MAX_LINE = 4096
    MAX_SIZE = 2**62
    CRLF = "\r\n"
    # RFC 9112 §7.1.1: chunk-size *( BWS ";" BWS name [ BWS "=" BWS value ] ),
    # a value being a token or a quoted-string. Any other byte (a control
    # byte, a bare CR or LF) makes the line, and the connection, unusable.
    TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
    QUOTED = '"(?:[\t !#-\[\]-~\x80-\xff]|\\\\[\t -~\x80-\xff])*"'
    EXTENSION = "[ \t]*;[ \t]*#{TOKEN}(?:[ \t]*=[ \t]*(?:#{TOKEN}|#{QUOTED}))?"
    SIZE_LINE = Regexp.new("\\A(\\h+)(?:#{EXTENSION})*\\z".b, Regexp::NOENCODING)

    attr_writer :sink

    def initialize(sink)
      @sink = sink
      @state = :size
      @pending = String.new(encoding: Encoding::BINARY)
      @remaining = 0
    end

    def feed(data)
      @pending << data
      position = 0
      loop do
        case @state
        when :data
          position = consume_data(position)
          return nil if @state == :data
        else
          line_end = @pending.index(CRLF, position)
          return keep_from(position) unless line_end
          raise BodyError.new(400, "chunk line too long") if line_end - position > MAX_LINE

          line = @pending.byteslice(position, line_end - position)
          position = line_end + 2
          return @pending.byteslice(position, @pending.bytesize - position) if take_line(line) == :finished
        end
      end
    end

    private

    def keep_from(position)
      raise BodyError.new(400, "chunk line too long") if @pending.bytesize - position > MAX_LINE

      @pending = @pending.byteslice(position, @pending.bytesize - position)
      nil
    end

    def consume_data(position)
      available = @pending.bytesize - position
      if available <= @remaining
        @sink.write(position.zero? ? @pending : @pending.byteslice(position, available)) if available.positive?
        @remaining -= available
        @pending = String.new(encoding: Encoding::BINARY)
        return 0
      end
      @sink.write(@pending.byteslice(position, @remaining)) if @remaining.positive?
      position += @remaining
      @remaining = 0
      @state = :data_end
      position
    end

    def take_line(line)
      case @state
      when :size then take_size(line)
      when :data_end
        raise BodyError.new(400, "malformed chunk") unless line.empty?

        @state = :size
      when :trailer
        return :finished if line.empty?
        raise BodyError.new(400, "malformed trailer line") if line.match?(/[\r\n]/)
      end
      nil
    end

    def take_size(line)
      match = SIZE_LINE.match(line)
      raise BodyError.new(400, "malformed chunk size") unless match

      @remaining = match[1].to_i(16)
      raise BodyError.new(400, "chunk size too large") if @remaining >= MAX_SIZE

      @state = @remaining.zero? ? :trailer : :data
      nil
    end
  end
end
