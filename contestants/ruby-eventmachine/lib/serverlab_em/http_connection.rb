# frozen_string_literal: true

require "eventmachine"
require "socket"
require "thin_parser"

module ServerlabEM
  # One HTTP/1.1 client connection on the reactor. Request heads go through
  # Thin's Ragel/Mongrel C parser; bodies (Content-Length or chunked) are
  # framed here and streamed into the handler's sink as they arrive.
  class HttpConnection < EM::Connection
    MAX_HEAD_BYTES = 64 * 1024
    HEAD_END = "\r\n\r\n"
    BARE_LF_HEAD_END = "\n\n"

    def initialize(app)
      super()
      @app = app
    end

    def post_init
      @app.stats.connections_open += 1
      @app.stats.connections_total += 1
      # Comet lines are small writes spaced by the emit interval; Nagle would
      # hold each one back until the previous is acknowledged.
      set_sock_opt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      @parser = Thin::HttpParser.new
      @buffer = String.new(encoding: Encoding::BINARY)
      @scan_from = 0
      @state = :head
      @processing = false
      @on_close = nil
    end

    def receive_data(data)
      case @state
      when :head
        @buffer << data
        process_buffer
      when :body
        feed_body(data)
      when :busy
        hold_pipelined(data)
      when :draining
        drain(data)
      when :upgraded
        @upgraded.receive_data(data)
      end
    rescue StandardError => e
      fail_internally(e)
    end

    def unbind
      @app.stats.connections_open -= 1
      @socket = nil # EM closes the descriptor; its number may be reused
      @state = :closed
      @on_close&.call
      @on_close = nil
    end

    # --- used by handlers -------------------------------------------------

    # Whoever holds the connection after the response head (a push
    # subscription, a file stream) registers here to learn of a disconnect.
    def on_close(&block)
      @on_close = block
    end

    def loopback?
      @loopback = loopback_peer? if @loopback.nil?
      @loopback
    end

    # now: a push delivery, handed to the kernel at once (see #write_now).
    def respond(status, content_type, body, extra_headers = nil, now: false)
      connection = connection_header
      extra_headers = "#{extra_headers}#{connection}" if connection
      head = Responses.fixed_length(status, content_type, body.bytesize, extra_headers)
      answer = @request.head? ? head : head << body
      now ? write_now(answer) : send_data(answer)
      count_response(status)
      request_done
    end

    def respond_json(status, object, extra_headers = nil)
      respond(status, Responses::JSON_TYPE, JSON.generate(object), extra_headers)
    end

    def respond_error(status, reason, extra_headers = nil)
      @keep_alive = false if status == 413
      respond(status, Responses::JSON_TYPE, Responses.error_body(reason), extra_headers)
    end

    # Sends a head whose body the caller writes later (files, comet streams);
    # the caller calls request_done when the body is complete.
    def send_head(head_for_framing)
      send_data(head_for_framing.call(connection_header))
      count_response(200)
    end

    # Hands a push delivery to the kernel now, on the reactor thread, so that
    # its `sent`, stamped just before, is the moment of the write (spec §6).
    # send_data only buffers: EM writes at the reactor's next turn, after the
    # whole emit cycle has been stamped. When nothing of this connection waits
    # in EM's buffer the bytes are written here, as node's socket.write does;
    # what the kernel does not take (its buffer full) follows through EM's
    # buffer, in order. No TLS here: the descriptor carries plain bytes.
    def write_now(data)
      return send_data(data) unless get_outbound_data_size.zero?

      written = socket.write_nonblock(data, exception: false)
      written = 0 if written == :wait_writable
      send_data(data.byteslice(written..)) if written < data.bytesize
    rescue SystemCallError, IOError
      close_connection # the client is gone (EPIPE, ECONNRESET); unbind follows
    end

    def request_done
      @on_close = nil
      unless @keep_alive
        @draining ? start_draining : close_after_writing
        return
      end
      @state = :head
      @responded = false
      process_buffer unless @processing
    end

    def head_request?
      @request.head?
    end

    # Hands the connection to the protocol its 101 switched to (a WebSocket,
    # which has sent the 101 itself): from here on every byte read goes to
    # receiver.receive_data. Returns what was read past the request head.
    def upgrade(receiver)
      count_response(101)
      @state = :upgraded
      @upgraded = receiver
      pending = @buffer
      @buffer = String.new(encoding: Encoding::BINARY)
      pending
    end

    private

    # --- request heads ----------------------------------------------------

    def process_buffer
      @processing = true
      start_request(take_head) while @state == :head && complete_head?
    ensure
      @processing = false
    end

    def complete_head?
      return false if @buffer.empty?

      @head_end = @buffer.index(HEAD_END, @scan_from)
      return true if @head_end

      if @buffer.bytesize > MAX_HEAD_BYTES
        reject(431, "request header section too large")
      elsif @buffer.index(BARE_LF_HEAD_END, @scan_from)
        reject(400, "malformed request")
      else
        @scan_from = [@buffer.bytesize - 3, 0].max
      end
      false
    end

    def take_head
      size = @head_end + HEAD_END.bytesize
      @scan_from = 0
      return reject(431, "request header section too large") if size > MAX_HEAD_BYTES

      if size == @buffer.bytesize
        head = @buffer
        @buffer = String.new(encoding: Encoding::BINARY)
      else
        head = @buffer.byteslice(0, size)
        @buffer = @buffer.byteslice(size, @buffer.bytesize - size)
      end
      head
    end

    def start_request(head)
      return unless head

      request = parse_head(head)
      return reject(400, "malformed request") unless request

      @app.stats.requests_total += 1
      @request = request
      @responded = false
      @keep_alive = request.keep_alive?
      @handler = @app.router.route(request, self)
      @sink = @handler.body_sink(request)
      begin_body(head)
    end

    def parse_head(head)
      env = {}
      @parser.reset
      @parser.execute(env, head, 0)
      Request.new(env)
    rescue Thin::InvalidRequest
      nil
    end

    # --- request bodies ---------------------------------------------------

    def begin_body(head)
      @decoder = body_decoder(Framing.of(head, @request.http10?))
      return dispatch unless @decoder

      send_data(Responses::CONTINUE) if @request.expects_continue?
      @state = :body
      pending = @buffer
      @buffer = String.new(encoding: Encoding::BINARY)
      feed_body(pending) unless pending.empty?
    rescue BodyError => e
      refuse_body(e)
    end

    def body_decoder(framing)
      # Both framing fields at once is a smuggling pattern: honour chunked, then close.
      @keep_alive = false if framing.close
      return ChunkedBody.new(@sink) if framing.chunked

      framing.length&.positive? ? ContentLengthBody.new(framing.length, @sink) : nil
    end

    def feed_body(data)
      leftover = @decoder.feed(data)
      if @sink.refusal
        @decoder = nil if leftover
        return refuse_body(@sink.refusal)
      end
      return unless leftover

      @decoder = nil
      @buffer = leftover
      dispatch
    rescue BodyError => e
      refuse_body(e)
    end

    # After a 413 the framing is still intact: read the rest of the body away
    # before closing, because closing on unread data sends a reset that can
    # destroy the answer before the client reads it.
    def refuse_body(error)
      @keep_alive = false
      @draining = error.status == 413 && !@decoder.nil?
      @decoder = nil unless @draining
      respond_error(error.status, error.message)
    end

    def start_draining
      @state = :draining
      @decoder.sink = DiscardSink.new
      pending = @buffer
      @buffer = String.new(encoding: Encoding::BINARY)
      drain(pending) unless pending.empty?
    end

    def drain(data)
      return close_after_writing if @decoder.nil?

      close_after_writing if @decoder.feed(data)
    rescue BodyError
      close_after_writing
    end

    def close_after_writing
      @state = :closing
      close_connection_after_writing
    end

    def dispatch
      @state = :busy
      @handler.respond(self, @request, @sink)
    end

    # A client may send its next request before a held one (long poll, file
    # stream) is answered; keep it, but no more than one head's worth.
    def hold_pipelined(data)
      @buffer << data
      return if @buffer.bytesize <= MAX_HEAD_BYTES

      close_connection
    end

    # --- helpers ----------------------------------------------------------

    def reject(status, reason)
      @app.stats.requests_total += 1
      @request = Request.new({})
      @keep_alive = false
      @buffer = String.new(encoding: Encoding::BINARY)
      @state = :busy
      respond_error(status, reason)
      nil
    end

    # A bug must cost one connection, never the reactor: answer 500 if no
    # response has started, and close.
    def fail_internally(error)
      ServerlabEM.report_bug(error)
      @keep_alive = false
      @draining = false
      if @state == :closed || @state == :closing
        nil
      elsif @responded
        close_after_writing
      else
        @state = :busy
        @request ||= Request.new({})
        respond_error(500, "internal error")
      end
    end

    def connection_header
      if !@keep_alive
        "Connection: close\r\n"
      elsif @request.http10?
        "Connection: keep-alive\r\n"
      end
    end

    def count_response(status)
      @responded = true
      @app.stats.responses_total += 1
      @app.log_request(self, @request, status) if @app.logging
    end

    # The connection's descriptor as a Ruby socket for #write_now; EM owns it
    # and closes it, so Ruby never does.
    def socket
      @socket ||= BasicSocket.for_fd(EM.get_file_descriptor(signature)).tap { |io| io.autoclose = false }
    end

    def loopback_peer?
      peer = get_peername
      return false unless peer

      address = Socket.unpack_sockaddr_in(peer).last
      address.start_with?("127.") || address == "::1" || address.start_with?("::ffff:127.")
    rescue ArgumentError
      false
    end
  end
end
