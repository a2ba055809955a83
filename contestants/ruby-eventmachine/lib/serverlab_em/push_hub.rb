# frozen_string_literal: true

require "eventmachine"
require "json"

module ServerlabEM
  # The seed 004 Event Manager and Request Manager: named emitters on reactor
  # timers, and the push requests subscribed to each name in arrival order.
  class PushHub
    attr_reader :open_count

    def initialize(stats)
      @stats = stats
      # name => {subscription => true}: a Hash keeps insertion order (the
      # order the spec's "place" follows) and deletes in O(1).
      @subscribers = Hash.new { |hash, name| hash[name] = {} }
      @emitters = {}
      @open_count = 0
    end

    # --- emitters ---------------------------------------------------------

    # Starts (or replaces) the emitter for name; true when one was replaced.
    def set(name, interval_ms)
      emitter = (@emitters[name] ||= Emitter.new(self, name))
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

    # One emit cycle: snapshot the subscribers, deliver to each in order.
    def emit(emitter)
      created = Clock.now_ms
      seq = emitter.next_seq
      snapshot = @subscribers.key?(emitter.name) ? @subscribers[emitter.name].keys : []
      total = snapshot.size
      snapshot.each_with_index do |subscription, index|
        deliver(subscription, emitter, seq, created, total, index + 1)
      end
      emitter.record_cycle(total, Clock.now_ms - created)
    end

    # --- subscriptions ----------------------------------------------------

    def subscribe(subscription)
      @open_count += 1
      subscription.start_count = @open_count
      subscription.names.each { |name| @subscribers[name][subscription] = true }
    end

    def unsubscribe(subscription)
      @open_count -= 1
      subscription.names.each do |name|
        list = @subscribers[name]
        list.delete(subscription)
        @subscribers.delete(name) if list.empty?
      end
    end

    private

    def deliver(subscription, emitter, seq, created, total, place)
      sent = Clock.now_ms
      event = %({"name":#{emitter.name_json},"seq":#{seq},) +
              %("timings":{"duration":#{sent - created},"sent":#{sent},"created":#{created}},) +
              %("connections":{"total":#{total},"place":#{place}}})
      subscription.deliver(%({"response":{"event":#{event}},#{subscription.envelope(sent, @open_count)}}))
      @stats.responses_push += 1
    end

    # One named emitter: its timer and its counters for GET /stats. Cycles are
    # scheduled on a fixed grid (start + k * interval) so they do not drift;
    # a cycle that overruns is followed at once by the next one.
    class Emitter
      attr_reader :name, :name_json

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
        @last_duration = 0
        @max_duration = 0
        @total_duration = 0
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
      def next_seq
        @emits += 1
        @last_seq += 1
      end

      def record_cycle(deliveries, duration_ms)
        @deliveries += deliveries
        @last_duration = duration_ms
        @max_duration = duration_ms if duration_ms > @max_duration
        @total_duration += duration_ms
      end

      def stats
        { "interval_ms" => @interval_ms, "active" => @active, "emits" => @emits,
          "last_seq" => @last_seq, "deliveries" => @deliveries,
          "last_emit_duration_ms" => @last_duration, "max_emit_duration_ms" => @max_duration,
          "total_emit_duration_ms" => @total_duration }
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
