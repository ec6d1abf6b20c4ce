// A library the capture tests load with dlopen after the unwinder's caches are warm.
extern "C" __attribute__((visibility("default"), noinline)) void memrec_call_through(void (*f)(void*), void* arg) {
  f(arg);
  asm volatile("" ::: "memory");  // a real call: this frame stays on the stack
}
