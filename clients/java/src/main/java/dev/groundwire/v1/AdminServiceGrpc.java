package dev.groundwire.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Operates the server itself. Every RPC needs the `manage` permission.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminServiceGrpc {

  private AdminServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "groundwire.v1.AdminService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.groundwire.v1.ReloadConfigurationRequest,
      dev.groundwire.v1.ReloadConfigurationResponse> getReloadConfigurationMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReloadConfiguration",
      requestType = dev.groundwire.v1.ReloadConfigurationRequest.class,
      responseType = dev.groundwire.v1.ReloadConfigurationResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.groundwire.v1.ReloadConfigurationRequest,
      dev.groundwire.v1.ReloadConfigurationResponse> getReloadConfigurationMethod() {
    io.grpc.MethodDescriptor<dev.groundwire.v1.ReloadConfigurationRequest, dev.groundwire.v1.ReloadConfigurationResponse> getReloadConfigurationMethod;
    if ((getReloadConfigurationMethod = AdminServiceGrpc.getReloadConfigurationMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getReloadConfigurationMethod = AdminServiceGrpc.getReloadConfigurationMethod) == null) {
          AdminServiceGrpc.getReloadConfigurationMethod = getReloadConfigurationMethod =
              io.grpc.MethodDescriptor.<dev.groundwire.v1.ReloadConfigurationRequest, dev.groundwire.v1.ReloadConfigurationResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReloadConfiguration"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ReloadConfigurationRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.groundwire.v1.ReloadConfigurationResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ReloadConfiguration"))
              .build();
        }
      }
    }
    return getReloadConfigurationMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub>() {
        @java.lang.Override
        public AdminServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceStub(channel, callOptions);
        }
      };
    return AdminServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub>() {
        @java.lang.Override
        public AdminServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub>() {
        @java.lang.Override
        public AdminServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingStub(channel, callOptions);
        }
      };
    return AdminServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub>() {
        @java.lang.Override
        public AdminServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceFutureStub(channel, callOptions);
        }
      };
    return AdminServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Re-reads the configuration file the server was started with, validates it
     * completely and, if it is valid and changes nothing that needs a restart,
     * swaps it in atomically: calls already running finish on the configuration
     * they started with, calls that start afterwards see the new one (never a
     * mix). The same happens on SIGHUP. Health stays SERVING throughout.
     * Errors (the server then runs exactly as before): FAILED_PRECONDITION with
     * reason CONFIG_INVALID (BadRequest field violations name every offending
     * key), CONFIG_RESTART_REQUIRED (the violations name each changed key that
     * only a restart can apply) or RELOAD_UNAVAILABLE (the server runs the
     * built-in demo configuration, not a file); PERMISSION_DENIED without the
     * `manage` permission. Messages never contain file paths or secrets.
     * </pre>
     */
    default void reloadConfiguration(dev.groundwire.v1.ReloadConfigurationRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ReloadConfigurationResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReloadConfigurationMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service AdminService.
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public static abstract class AdminServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service AdminService.
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public static final class AdminServiceStub
      extends io.grpc.stub.AbstractAsyncStub<AdminServiceStub> {
    private AdminServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Re-reads the configuration file the server was started with, validates it
     * completely and, if it is valid and changes nothing that needs a restart,
     * swaps it in atomically: calls already running finish on the configuration
     * they started with, calls that start afterwards see the new one (never a
     * mix). The same happens on SIGHUP. Health stays SERVING throughout.
     * Errors (the server then runs exactly as before): FAILED_PRECONDITION with
     * reason CONFIG_INVALID (BadRequest field violations name every offending
     * key), CONFIG_RESTART_REQUIRED (the violations name each changed key that
     * only a restart can apply) or RELOAD_UNAVAILABLE (the server runs the
     * built-in demo configuration, not a file); PERMISSION_DENIED without the
     * `manage` permission. Messages never contain file paths or secrets.
     * </pre>
     */
    public void reloadConfiguration(dev.groundwire.v1.ReloadConfigurationRequest request,
        io.grpc.stub.StreamObserver<dev.groundwire.v1.ReloadConfigurationResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReloadConfigurationMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service AdminService.
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public static final class AdminServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingV2Stub> {
    private AdminServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Re-reads the configuration file the server was started with, validates it
     * completely and, if it is valid and changes nothing that needs a restart,
     * swaps it in atomically: calls already running finish on the configuration
     * they started with, calls that start afterwards see the new one (never a
     * mix). The same happens on SIGHUP. Health stays SERVING throughout.
     * Errors (the server then runs exactly as before): FAILED_PRECONDITION with
     * reason CONFIG_INVALID (BadRequest field violations name every offending
     * key), CONFIG_RESTART_REQUIRED (the violations name each changed key that
     * only a restart can apply) or RELOAD_UNAVAILABLE (the server runs the
     * built-in demo configuration, not a file); PERMISSION_DENIED without the
     * `manage` permission. Messages never contain file paths or secrets.
     * </pre>
     */
    public dev.groundwire.v1.ReloadConfigurationResponse reloadConfiguration(dev.groundwire.v1.ReloadConfigurationRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReloadConfigurationMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service AdminService.
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public static final class AdminServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingStub> {
    private AdminServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Re-reads the configuration file the server was started with, validates it
     * completely and, if it is valid and changes nothing that needs a restart,
     * swaps it in atomically: calls already running finish on the configuration
     * they started with, calls that start afterwards see the new one (never a
     * mix). The same happens on SIGHUP. Health stays SERVING throughout.
     * Errors (the server then runs exactly as before): FAILED_PRECONDITION with
     * reason CONFIG_INVALID (BadRequest field violations name every offending
     * key), CONFIG_RESTART_REQUIRED (the violations name each changed key that
     * only a restart can apply) or RELOAD_UNAVAILABLE (the server runs the
     * built-in demo configuration, not a file); PERMISSION_DENIED without the
     * `manage` permission. Messages never contain file paths or secrets.
     * </pre>
     */
    public dev.groundwire.v1.ReloadConfigurationResponse reloadConfiguration(dev.groundwire.v1.ReloadConfigurationRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReloadConfigurationMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service AdminService.
   * <pre>
   * Operates the server itself. Every RPC needs the `manage` permission.
   * </pre>
   */
  public static final class AdminServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminServiceFutureStub> {
    private AdminServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Re-reads the configuration file the server was started with, validates it
     * completely and, if it is valid and changes nothing that needs a restart,
     * swaps it in atomically: calls already running finish on the configuration
     * they started with, calls that start afterwards see the new one (never a
     * mix). The same happens on SIGHUP. Health stays SERVING throughout.
     * Errors (the server then runs exactly as before): FAILED_PRECONDITION with
     * reason CONFIG_INVALID (BadRequest field violations name every offending
     * key), CONFIG_RESTART_REQUIRED (the violations name each changed key that
     * only a restart can apply) or RELOAD_UNAVAILABLE (the server runs the
     * built-in demo configuration, not a file); PERMISSION_DENIED without the
     * `manage` permission. Messages never contain file paths or secrets.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.groundwire.v1.ReloadConfigurationResponse> reloadConfiguration(
        dev.groundwire.v1.ReloadConfigurationRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReloadConfigurationMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RELOAD_CONFIGURATION = 0;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_RELOAD_CONFIGURATION:
          serviceImpl.reloadConfiguration((dev.groundwire.v1.ReloadConfigurationRequest) request,
              (io.grpc.stub.StreamObserver<dev.groundwire.v1.ReloadConfigurationResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getReloadConfigurationMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.groundwire.v1.ReloadConfigurationRequest,
              dev.groundwire.v1.ReloadConfigurationResponse>(
                service, METHODID_RELOAD_CONFIGURATION)))
        .build();
  }

  private static abstract class AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.groundwire.v1.AdminProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AdminService");
    }
  }

  private static final class AdminServiceFileDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier {
    AdminServiceFileDescriptorSupplier() {}
  }

  private static final class AdminServiceMethodDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (AdminServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminServiceFileDescriptorSupplier())
              .addMethod(getReloadConfigurationMethod())
              .build();
        }
      }
    }
    return result;
  }
}
