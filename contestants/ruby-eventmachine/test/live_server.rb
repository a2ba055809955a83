# frozen_string_literal: true

require "minitest/autorun"
require "fileutils"
require "json"
require "net/http"
require "socket"
require "tmpdir"

# The real server (server.rb) on free ports, started once per set of options
# and stopped when the tests end.
class LiveServer
  ROOT = File.expand_path("..", __dir__)
  @running = {}

  class << self
    # The server started with these extra arguments (the first call starts it).
    def with(*args)
      @running[args] ||= new(args).tap(&:start)
    end

    def stop_all
      @running.each_value(&:stop)
    end
  end

  attr_reader :port, :syslog_port, :docroot

  def initialize(args)
    @args = args
  end

  def start
    @docroot = Dir.mktmpdir("ruby-em-docroot")
    File.write(File.join(@docroot, "small.txt"), "hello\n")
    File.binwrite(File.join(@docroot, "big.bin"), Random.new(7).bytes(3_000_000))
    File.symlink("/etc/passwd", File.join(@docroot, "escape"))
    @port = free_port
    @syslog_port = free_port
    @pid = Process.spawn("ruby", File.join(ROOT, "server.rb"), "--port", @port.to_s,
                         "--syslog-port", @syslog_port.to_s, "--docroot", @docroot, "--chunk-size", "4096", *@args)
    wait_ready
  end

  def stop
    Process.kill("TERM", @pid)
    Process.wait(@pid)
    FileUtils.rm_rf(@docroot)
  end

  private

  # A port free for both TCP and UDP, since syslog listens on both.
  def free_port
    loop do
      tcp = TCPServer.new("127.0.0.1", 0)
      port = tcp.addr[1]
      udp = UDPSocket.new
      begin
        udp.bind("127.0.0.1", port)
        return port
      rescue Errno::EADDRINUSE
        next
      ensure
        udp.close
        tcp.close
      end
    end
  end

  def wait_ready
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
    loop do
      return if Net::HTTP.get_response("127.0.0.1", "/stats", @port).code == "200"
    rescue SystemCallError
      raise "server did not start" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end
end

Minitest.after_run { LiveServer.stop_all }

# Requests to the default server (no extra arguments), for the tests.
module LiveServerClient
  def server
    LiveServer.with
  end

  def http(address = "127.0.0.1")
    Net::HTTP.start(address, server.port) { |client| yield client }
  end

  def post_json(path, body)
    http { |client| client.post(path, body.is_a?(String) ? body : JSON.generate(body), "Content-Type" => "application/json") }
  end

  def stats
    JSON.parse(http { |client| client.get("/stats") }.body)
  end

  # Sends raw bytes, reads until the server closes or goes quiet.
  def raw(bytes, quiet_after: 1.0)
    socket = TCPSocket.new("127.0.0.1", server.port)
    socket.write(bytes)
    reply = +""
    reply << socket.readpartial(65_536) while socket.wait_readable(quiet_after)
    reply
  rescue EOFError, Errno::ECONNRESET
    reply
  ensure
    socket&.close
  end

  # Polls until the block is true or seconds pass; its last value.
  def eventually(seconds = 3)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    loop do
      value = yield
      return value if value || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end

  # An event name no other test uses.
  def fresh_event(prefix)
    "#{prefix}-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}"
  end
end
