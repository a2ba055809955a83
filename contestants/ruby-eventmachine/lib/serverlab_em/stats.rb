# frozen_string_literal: true

module ServerlabEM
  # Counters behind GET /stats. The reactor is single-threaded, so plain
  # integers need no locking; grpc_calls is the one counter written by
  # another thread, the gRPC server's call loop (its only writer).
  class Stats
    SPEC_VERSION = "3.4"

    attr_accessor :connections_open, :connections_total, :requests_total,
                  :responses_total, :responses_push, :responses_timeouts,
                  :syslog_received, :syslog_bytes, :syslog_tcp_connections, :syslog_mode
    # The sse and websocket groups (spec §10, §11), but for the open
    # subscriber counts, which the push hub keeps.
    attr_reader :sse, :websocket
    # spec §16: gRPC calls started (any method), and Delivery messages queued
    # by emit cycles; the open Subscribe streams are the push hub's.
    attr_accessor :grpc_calls, :grpc_deliveries

    def initialize(server_name)
      @server_name = server_name
      @started_ms = Clock.now_ms
      @connections_open = 0
      @connections_total = 0
      @requests_total = 0
      @responses_total = 0
      @responses_push = 0
      @responses_timeouts = 0
      @syslog_received = 0
      @syslog_bytes = 0
      @syslog_tcp_connections = 0
      @syslog_mode = "count"
      # spec §7.1: what parse mode found; all 0 in count mode.
      @syslog_parse = { "parsed" => 0, "malformed" => 0, "rfc3164" => 0, "sd_elements" => 0, "msg_bytes" => 0 }
      @sse = { "total" => 0, "deliveries" => 0, "replayed" => 0, "gaps" => 0, "heartbeats" => 0, "timeouts" => 0 }
      @websocket = { "open" => 0, "total" => 0, "deliveries" => 0, "echoes" => 0, "publishes" => 0 }
      @grpc_calls = 0
      @grpc_deliveries = 0
    end

    def count_syslog_message(size)
      @syslog_received += 1
      @syslog_bytes += size
    end

    # parser: the SyslogParse that parsed the message, or nil if malformed.
    def count_parsed_syslog(parser, msg_bytes)
      return @syslog_parse["malformed"] += 1 unless parser

      @syslog_parse["parsed"] += 1
      @syslog_parse["rfc3164"] += 1 if parser.rfc3164
      @syslog_parse["sd_elements"] += parser.sd_elements
      @syslog_parse["msg_bytes"] += msg_bytes
    end

    # A gRPC call is an HTTP/2 request (spec §5): requests.total counts it.
    def snapshot(push_hub)
      grpc_calls = @grpc_calls
      {
        "spec_version" => SPEC_VERSION,
        "server" => @server_name,
        "uptime_ms" => Clock.now_ms - @started_ms,
        "connections" => { "open" => @connections_open, "total" => @connections_total },
        "requests" => { "total" => @requests_total + grpc_calls, "open_push" => push_hub.open_subscribers(:push) },
        "responses" => { "total" => @responses_total, "push" => @responses_push,
                         "timeouts" => @responses_timeouts },
        "events" => push_hub.event_stats,
        "syslog" => { "received" => @syslog_received, "bytes" => @syslog_bytes,
                      "tcp_connections" => @syslog_tcp_connections,
                      "mode" => @syslog_mode, **@syslog_parse },
        "sse" => @sse.merge("open" => push_hub.open_subscribers(:sse)),
        "websocket" => @websocket.merge("subscribers" => push_hub.open_subscribers(:websocket)),
        "grpc" => { "calls" => grpc_calls, "open" => push_hub.open_subscribers(:grpc),
                    "deliveries" => @grpc_deliveries }
      }
    end
  end
end
