# frozen_string_literal: true

module ServerlabEM
  # Maps a request to its handler, deciding 404, 405 and the loopback rule
  # before any body is read.
  class Router
    Route = Struct.new(:methods, :handler, :loopback_only, :allow_header)
    LOOPBACK_ONLY = "control endpoints answer loopback clients only"

    def initialize(app, docroot:, chunk_size:)
      @exact = {
        "/perf" => entry(%w[GET HEAD], Handlers::Perf.new),
        "/upload" => entry(%w[POST], Handlers::Upload.new),
        "/timestamp" => entry(%w[GET], Handlers::Timestamp.new),
        "/stats" => entry(%w[GET], Handlers::Stats.new(app)),
        "/logging" => entry(%w[POST], Handlers::Logging.new(app), loopback_only: true),
        "/event/set" => entry(%w[POST], Handlers::EventSet.new(app), loopback_only: true),
        "/event/clear" => entry(%w[POST], Handlers::EventClear.new(app), loopback_only: true),
        "/push" => entry(%w[POST], Handlers::Push.new(app)),
        "/sse" => entry(%w[GET], Handlers::Sse.new(app)),
        "/ws" => entry(%w[GET], Handlers::WebSocketUpgrade.new(app))
      }
      @files = docroot && entry(%w[GET HEAD], Handlers::Files.new(docroot, chunk_size))
      @not_found = Handlers::Error.new(404, "not found")
      @forbidden = Handlers::Error.new(403, LOOPBACK_ONLY)
    end

    def route(request, connection)
      found = find(request.path)
      return @not_found unless found
      return Handlers::Error.new(405, "method not allowed", found.allow_header) unless found.methods.include?(request.method)
      return @forbidden if found.loopback_only && !connection.loopback?

      found.handler
    end

    private

    def find(path)
      @exact[path] || (@files if path.start_with?(Handlers::Files::PREFIX))
    end

    def entry(methods, handler, loopback_only: false)
      Route.new(methods, handler, loopback_only, "Allow: #{methods.join(', ')}\r\n")
    end
  end
end
