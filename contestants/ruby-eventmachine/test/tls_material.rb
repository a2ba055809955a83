# frozen_string_literal: true

require "openssl"
require_relative "live_server"

# What the TLS tests share: a throwaway ECDSA P-256 certificate and key, made
# once as serverlab makes one per run, and a client that trusts only it.
module TlsMaterial
  class << self
    # [certificate path, key path]; the key file is 0600, as the spec's.
    def files
      @files ||= begin
        folder = Dir.mktmpdir("ruby-em-tls")
        Minitest.after_run { FileUtils.rm_rf(folder) }
        key = OpenSSL::PKey::EC.generate("prime256v1")
        File.write(File.join(folder, "cert.pem"), self_signed(key).to_pem)
        File.write(File.join(folder, "key.pem"), key.private_to_pem, perm: 0o600)
        [File.join(folder, "cert.pem"), File.join(folder, "key.pem")]
      end
    end

    # A free TCP port, one per name, for the servers the tests start.
    def port(name)
      (@ports ||= {})[name] ||= TCPServer.open("127.0.0.1", 0) { |probe| probe.addr[1] }
    end

    private

    def self_signed(key)
      cert = OpenSSL::X509::Certificate.new
      cert.version = 2
      cert.serial = 1
      cert.subject = cert.issuer = OpenSSL::X509::Name.parse("/CN=localhost")
      cert.public_key = key
      cert.not_before = Time.now - 60
      cert.not_after = Time.now + 3600
      factory = OpenSSL::X509::ExtensionFactory.new(cert, cert)
      cert.add_extension(factory.create_extension("subjectAltName", "DNS:localhost,IP:127.0.0.1"))
      cert.sign(key, OpenSSL::Digest.new("SHA256"))
    end
  end

  # A client context trusting only the test's certificate; the block may
  # loosen it (older versions, other suites) so that a refusal is the server's.
  def client_context
    context = OpenSSL::SSL::SSLContext.new
    context.ca_file = TlsMaterial.files.first
    context.verify_mode = OpenSSL::SSL::VERIFY_PEER
    context.security_level = 0
    yield context if block_given?
    context
  end

  def tls_connect(port, context = client_context)
    server
    tcp = TCPSocket.new("127.0.0.1", port)
    tls = OpenSSL::SSL::SSLSocket.new(tcp, context)
    tls.hostname = "127.0.0.1"
    tls.sync_close = true
    tls.connect
    tls
  rescue StandardError
    tcp&.close
    raise
  end
end
