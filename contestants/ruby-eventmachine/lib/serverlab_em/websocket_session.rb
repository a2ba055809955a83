# frozen_string_literal: true

require "eventmachine"
require "json"

module ServerlabEM
  # One upgraded GET /ws connection (spec §11). The driver does the framing,
  # pongs, the close handshake and the close codes of broken frames (1002,
  # 1007, 1009); subscribe, echo and publish messages, 1003 and 1008 are
  # handled here. The session is the driver's socket: #env and #write.
  class WebSocketSession
    MAX_MESSAGE = 65_536
    # After closing a connection for a broken frame, the driver reads no
    # more, so the client's close frame cannot be told from other bytes: read
    # and discard until the client goes quiet, then close. Closing on unread
    # bytes would send a reset, which can destroy the close frame in flight.
    LINGER_QUIET_S = 0.2
    # The most a close handshake may take before TCP is closed (spec §11:
    # within 2 seconds).
    LINGER_MAX_S = 1.5
    HANDLERS = { "subscribe" => :subscribe, "echo" => :echo, "publish" => :publish }.freeze

    attr_reader :env

    def initialize(app, connection, env)
      @app = app
      @connection = connection
      @env = env
      @driver = WebSocketDriver.new(self, max_length: MAX_MESSAGE, require_masking: true)
      @subscriber = nil
      @closing = false
      @failed = false
      @lingering = false
      @quiet = nil
      @timers = []
      @now = false
    end

    # Sends the 101 and takes the connection over; false if the driver
    # refused the handshake (a malformed Sec-WebSocket-Extensions).
    def start
      return false unless @driver.start

      @driver.on(:message) { |event| receive_message(event.data) }
      @driver.on(:error) { @failed = true }
      @driver.on(:close) { closed }
      @app.stats.websocket["open"] += 1
      @app.stats.websocket["total"] += 1
      @connection.on_close { unbound }
      pending = @connection.upgrade(self)
      receive_data(pending) unless pending.empty?
      true
    end

    def receive_data(data)
      @lingering ? quiet_then_close : @driver.parse(data)
    end

    # The driver's socket. A delivery's frame is written at once
    # (HttpConnection#write_now); replies go through EM's buffer.
    def write(data)
      @now ? @connection.write_now(data) : @connection.send_data(data)
    end

    def send_message(text)
      @driver.text(text)
    end

    # A push delivery: framed and handed to the kernel now (spec §6).
    def deliver_message(text)
      @now = true
      @driver.text(text)
    ensure
      @now = false
    end

    private

    def receive_message(data)
      return if @closing
      return refuse(1003, "binary messages are not accepted") unless data.is_a?(String)

      message = JSON.parse(data)
      handler = message.is_a?(Hash) && HANDLERS[message["type"]]
      problem = handler ? __send__(handler, message) : "a message is a json object of a known type"
      refuse(1008, problem) if problem
    rescue JSON::ParserError, JSON::GeneratorError, EncodingError
      refuse(1008, "a message is one json object")
    end

    def subscribe(message)
      return "subscribed already" if @subscriber

      names = message["events"]
      return "events must be 1 to 16 distinct event names" unless Handlers.event_names?(names)

      send_message(JSON.generate("type" => "subscribed", "events" => names))
      @subscriber = WebSocketSubscriber.new(@app, @connection, names, JSON.generate(message), self)
      @subscriber.open
      nil
    end

    def echo(message)
      send_message(JSON.generate("type" => "echo", "data" => message["data"]))
      @app.stats.websocket["echoes"] += 1
      nil
    end

    def publish(message)
      name = message["event"]
      return "publish needs an event name" unless Handlers.event_name?(name)

      @app.stats.websocket["publishes"] += 1
      seq, total = @app.push_hub.publish(name, JSON.generate(message["data"]))
      send_message(JSON.generate("type" => "published", "event" => name, "seq" => seq, "total" => total))
      nil
    end

    # A message this server does not take: close with code, wait for the
    # client's close frame (the driver still reads it), at most LINGER_MAX_S.
    def refuse(code, reason)
      stop_subscribing
      @closing = true
      @driver.close(reason, code)
      @timers << EM::Timer.new(LINGER_MAX_S) { @connection.close_connection }
    end

    # The close handshake is over (either side began it), or the driver
    # closed for a broken frame, after which it reads nothing more.
    def closed
      stop_subscribing
      @closing = true
      return @connection.close_connection_after_writing unless @failed

      @lingering = true
      @timers << EM::Timer.new(LINGER_MAX_S) { @connection.close_connection }
      quiet_then_close
    end

    def quiet_then_close
      @quiet&.cancel
      @quiet = EM::Timer.new(LINGER_QUIET_S) { @connection.close_connection }
    end

    # A client that stopped with a close frame is gone (spec §6): it leaves
    # the event lists before TCP closes.
    def stop_subscribing
      @subscriber&.leave
    end

    def unbound
      @app.stats.websocket["open"] -= 1
      stop_subscribing
      @timers.each(&:cancel)
      @quiet&.cancel
    end
  end

  # A WebSocket connection that has subscribed: one text message per delivery.
  class WebSocketSubscriber < Subscriber
    def initialize(app, connection, names, request_json, session)
      super(app, connection, :websocket, names, request_json)
      @session = session
    end

    def open
      join
    end

    def deliver(body, _name, _seq)
      @app.stats.websocket["deliveries"] += 1
      @session.deliver_message(body)
    end
  end
end
