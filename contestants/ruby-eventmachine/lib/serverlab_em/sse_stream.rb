# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # One GET /sse stream (spec §10): a subscriber of its events whose
  # deliveries are SSE messages. Its id is its position, `name:seq` per
  # event; a reconnect with Last-Event-ID gets what it missed from each
  # event's replay buffer, or a gap message for what the buffer lost. Every
  # message is one chunk in one write, so it is never split across flushes;
  # a live delivery is written at once (HttpConnection#write_now).
  class SseStream < Subscriber
    CONTENT_TYPE = "text/event-stream"
    NO_CACHE = "Cache-Control: no-cache\r\n"
    DEFAULT_HEARTBEAT_MS = 15_000
    HEARTBEAT = Responses.chunk(": heartbeat\n\n").freeze

    # body: the stream's `request`; named: the Last-Event-ID positions.
    def initialize(app, connection, body, named)
      super(app, connection, :sse, body["events"], JSON.generate(body))
      @body = body
      @named = named
      @positions = {}
      @timers = []
    end

    def open
      @connection.send_head(->(extra) { Responses.chunked(200, CONTENT_TYPE, "#{NO_CACHE}#{extra}") })
      @app.stats.sse["total"] += 1
      @names.each { |name| @positions[name] = @named.fetch(name) { @app.push_hub.last_seq(name) } }
      # Registering and replaying are one step: nothing runs between them.
      join
      @connection.on_close { leave }
      @names.each { |name| resume(name, @named[name]) if @named.key?(name) }
      write("id: #{id}\n\n")
      start_timers
    end

    def deliver(body, name, seq)
      @app.stats.sse["deliveries"] += 1
      send_event(body, name, seq, now: true)
    end

    private

    def id
      @names.map { |name| "#{name}:#{@positions[name]}" }.join(",")
    end

    # One message; its id is the position after it.
    def send_event(data, name, seq, type = nil, now: false)
      @positions[name] = seq
      write("#{type && "event: #{type}\n"}id: #{id}\ndata: #{data}\n\n", now: now)
    end

    def write(message, now: false)
      chunk = Responses.chunk(message)
      now ? @connection.write_now(chunk) : @connection.send_data(chunk)
    end

    # What the stream missed of name after seq `after`: a gap message if the
    # buffer no longer reaches back that far (or `after` comes from another
    # run of the server), then the buffered cycles.
    def resume(name, after)
      newest = @app.push_hub.last_seq(name)
      return if after == newest

      replays = @app.push_hub.replays_after(name, after)
      following = replays.empty? ? newest + 1 : replays.first.first
      send_gap(name, after, following) if following > after + 1 || after > newest
      replays.each do |seq, event|
        @app.stats.sse["replayed"] += 1
        send_event(event + answer_tail(Clock.now_ms, @app.push_hub.open_count), name, seq)
      end
    end

    def send_gap(name, after, following)
      @app.stats.sse["gaps"] += 1
      gap = JSON.generate("gap" => { "name" => name, "after" => after, "next" => following })
      send_event(gap, name, following - 1, "gap")
    end

    def start_timers
      heartbeat_ms = @body.fetch("heartbeat_ms", DEFAULT_HEARTBEAT_MS)
      @timers << EM::PeriodicTimer.new(heartbeat_ms / 1000.0) { heartbeat } if heartbeat_ms.positive?
      @timers << EM::Timer.new(@body["duration_ms"] / 1000.0) { time_out } if @body.key?("duration_ms")
    end

    def heartbeat
      @app.stats.sse["heartbeats"] += 1
      @connection.send_data(HEARTBEAT)
    end

    # The timeout message, then the end of the chunked body; the connection
    # then serves its next request.
    def time_out
      body = %({"response":{"timeout":true},#{answer_tail(Clock.now_ms, @app.push_hub.open_count)})
      @app.stats.sse["timeouts"] += 1
      leave
      @connection.send_data("#{Responses.chunk("event: timeout\ndata: #{body}\n\n")}#{Responses::LAST_CHUNK}")
      @connection.request_done
    end

    def left
      @timers.each(&:cancel)
      @timers.clear
    end
  end
end
