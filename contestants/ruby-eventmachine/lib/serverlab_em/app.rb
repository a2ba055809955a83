# frozen_string_literal: true

module ServerlabEM
  # Unexpected exceptions are bugs; they are printed (never per request in
  # normal operation) so a run's log shows them.
  def self.report_bug(error)
    warn("ruby-eventmachine: #{error.class}: #{error.message} (#{error.backtrace&.first})")
  end

  # What every connection shares: counters, the push hub, the router and the
  # logging switch.
  class App
    attr_reader :stats, :push_hub, :router
    attr_accessor :logging

    def initialize(name:, docroot:, chunk_size:)
      @stats = Stats.new(name)
      @push_hub = PushHub.new
      @router = Router.new(self, docroot: docroot, chunk_size: chunk_size)
      @logging = false
    end

    def log_request(connection, request, status)
      peer = connection.get_peername
      address = peer ? Socket.unpack_sockaddr_in(peer).last : "-"
      $stderr.write("#{address} #{request.method} #{request.env['REQUEST_URI']} #{status}\n")
    end
  end
end
