# frozen_string_literal: true

require "eventmachine"
require "json"

module ServerlabEM
  # The seed 004 Event Manager and Request Manager: named emitters on reactor
  # timers, and the subscribers of every transport (long poll, comet, SSE,
  # WebSocket, gRPC Subscribe) to each name in arrival order, so one snapshot
  # spans them all.
  class PushHub
    # Emit cycles kept per event for SSE replay (spec §10): exactly the newest 64.
    REPLAY_BUFFER = 64

    # Open subscribers of every transport: connections.start/finish (spec §6).
    attr_reader :open_count

    def initialize
      # name => {subscriber => true}: a Hash keeps insertion order (the
      # order the spec's "place" follows) and deletes in O(1).
      @subscribers = Hash.new { |hash, name| hash[name] = {} }
      @emitters = {}
      @open_count = 0
      @open_by_kind = Hash.new(0)
    end

    # --- emitters ---------------------------------------------------------

    # Starts (or replaces) the emitter for name; true when one was replaced.
    def set(name, interval_ms)
      emitter = emitter(name)
      replaced = emitter.active?
      emitter.start(interval_ms)
      replaced
    end

    # Stops the named emitter, or every active one when name is nil; returns
    # the names stopped, sorted.
    def clear(name)
      names = name ? [name] : @emitters.keys
      names.select { |n| @emitters[n]&.active? }.sort.each { |n| @emitters[n].stop }
    end

    def active?(name)
      @emitters[name]&.active? || false
    end

    def event_stats
      @emitters.transform_values(&:stats)
    end

    def last_seq(name)
      @emitters[name]&.last_seq || 0
    end

    # A publish cycle (spec §11): an emit cycle now, whether or not the event
    # has an emitter, leaving the emitter's schedule alone. Cycles run to the
    # end on the one reactor thread, so it never overlaps another.
    def publish(name, data_json)
      emit(emitter(name), data_json)
    end

    # One emit cycle: snapshot the subscribers, deliver to each in order,
    # skipping the ones gone since. Each delivery is stamped, made and
    # written to its socket in one step (spec §6), but a gRPC stream's, which
    # is queued for its call's thread to stamp and send (GrpcSubscription);
    # the cycle's emit duration runs to the last `sent`, whichever thread
    # takes it. Returns [seq, snapshot size].
    def emit(emitter, data_json = nil)
      created = Clock.now_ms
      seq = emitter.next_seq(created, data_json)
      snapshot = @subscribers.key?(emitter.name) ? @subscribers[emitter.name].keys : []
      total = snapshot.size
      delivered = 0
      last_sent = created
      snapshot.each_with_index do |subscriber, index|
        next unless subscriber.deliverable?

        delivered += 1
        next subscriber.enqueue(emitter, seq, created, total, index + 1, data_json) if subscriber.queued?

        last_sent = Clock.now_ms
        event = EventJson.live(emitter, seq, created, last_sent, total, index + 1, data_json)
        subscriber.deliver(event + subscriber.answer_tail(last_sent, @open_count), emitter.name, seq)
      end
      emitter.record_cycle(seq, delivered, last_sent - created)
      [seq, total]
    end

    # The buffered cycles of name after seq, as [seq, "response" part of the
    # replayed delivery] pairs, oldest first (spec §10).
    def replays_after(name, seq)
      emitter = @emitters[name]
      return [] unless emitter

      emitter.history_after(seq).map do |cycle|
        [cycle.seq, EventJson.replayed(emitter, cycle, Clock.now_ms)]
      end
    end

    # --- subscriptions ----------------------------------------------------

    def subscribe(subscriber)
      @open_count += 1
      @open_by_kind[subscriber.kind] += 1
      subscriber.start_count = @open_count
      subscriber.names.each { |name| @subscribers[name][subscriber] = true }
    end

    def unsubscribe(subscriber)
      @open_count -= 1
      @open_by_kind[subscriber.kind] -= 1
      subscriber.names.each do |name|
        list = @subscribers[name]
        list.delete(subscriber)
        @subscribers.delete(name) if list.empty?
      end
    end

    # Open subscribers of one kind (:push, :sse, :websocket).
    def open_subscribers(kind)
      @open_by_kind[kind]
    end

    private

    def emitter(name)
      @emitters[name] ||= Emitter.new(self, name)
    end

    # The "response" part of a delivery, up to the answer's tail: the event
    # with its cycle's timings and place, "data" for publish cycles (§11),
    # "replayed" for SSE replays (§10).
    module EventJson
      module_function

      def live(emitter, seq, created, sent, total, place, data_json)
        build(emitter, seq, created, sent, total, place, data_json && %(,"data":#{data_json}))
      end

      # A replay is a cycle of one (spec §10): total and place are 1.
      def replayed(emitter, cycle, sent)
        data = cycle.data_json && %(,"data":#{cycle.data_json})
        build(emitter, cycle.seq, cycle.created, sent, 1, 1, %(#{data},"replayed":true))
      end

      def build(emitter, seq, created, sent, total, place, extra)
        %({"response":{"event":{"name":#{emitter.name_json},"seq":#{seq},) +
          %("timings":{"duration":#{sent - created},"sent":#{sent},"created":#{created}},) +
          %("connections":{"total":#{total},"place":#{place}}#{extra}}},)
      end
    end

    # One emit cycle as the replay buffer keeps it.
    Cycle = Struct.new(:seq, :created, :data_json)

    # One named emitter: its timer, its counters for GET /stats and its
    # replay buffer, all kept across clear and set. Cycles are scheduled on a
    # fixed grid (start + k * interval) so they do not drift; a cycle that
    # overruns is followed at once by the next one. Everything runs on the
    # reactor thread but the emit durations, which a gRPC call's thread
    # raises too (raise_duration), so they are kept under a lock.
    class Emitter
      attr_reader :name, :name_json, :last_seq

      def initialize(hub, name)
        @hub = hub
        @name = name
        @name_json = JSON.generate(name)
        @interval_ms = 0
        @active = false
        @timer = nil
        @emits = 0
        @last_seq = 0
        @deliveries = 0
        @durations = Mutex.new
        @cycle_seq = 0
        @last_duration = 0
        @max_duration = 0
        @total_duration = 0
        @history = []
      end

      def active?
        @active
      end

      def start(interval_ms)
        stop
        @interval_ms = interval_ms
        @active = true
        @due_ms = Clock.now_ms + interval_ms
        schedule
      end

      def stop
        @active = false
        @timer&.cancel
        @timer = nil
      end

      # seq numbers are per name for the server's lifetime: replacing or
      # clearing an emitter never resets them.
      def next_seq(created, data_json)
        @emits += 1
        @last_seq += 1
        @history << Cycle.new(@last_seq, created, data_json)
        @history.shift if @history.size > REPLAY_BUFFER
        @durations.synchronize do
          @cycle_seq = @last_seq
          @last_duration = 0
        end
        @last_seq
      end

      def history_after(seq)
        @history.select { |cycle| cycle.seq > seq }
      end

      def record_cycle(seq, deliveries, duration_ms)
        @deliveries += deliveries
        raise_duration(seq, duration_ms)
      end

      # Cycle seq lasted at least duration_ms (a delivery was stamped then):
      # raises its emit duration, unless a later cycle has begun.
      def raise_duration(seq, duration_ms)
        @durations.synchronize do
          next unless seq == @cycle_seq && duration_ms > @last_duration

          @total_duration += duration_ms - @last_duration
          @last_duration = duration_ms
          @max_duration = duration_ms if duration_ms > @max_duration
        end
      end

      def stats
        durations = @durations.synchronize do
          { "last_emit_duration_ms" => @last_duration, "max_emit_duration_ms" => @max_duration,
            "total_emit_duration_ms" => @total_duration }
        end
        { "interval_ms" => @interval_ms, "active" => @active, "emits" => @emits,
          "last_seq" => @last_seq, "deliveries" => @deliveries, **durations }
      end

      private

      def schedule
        delay_ms = [@due_ms - Clock.now_ms, 0].max
        @timer = EM::Timer.new(delay_ms / 1000.0) { fire }
      end

      def fire
        @timer = nil
        @hub.emit(self)
        return unless @active

        now = Clock.now_ms
        @due_ms += @interval_ms
        @due_ms = now if @due_ms < now
        schedule
      end
    end
  end
end
