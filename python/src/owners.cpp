// The owner scans' per-tensor work (memrec/_owners.py says what is scanned when): the parameters and buffers named
// so far, what was last sent for each tensor, and the walks over the known parameters' gradients and an optimizer's
// parameters. A tensor is read through its TensorImpl (Tensor._cdata): device, layout, storage, and a parameter's
// gradient, with no Python code run for a torch.Tensor or nn.Parameter, no reference kept and nothing allocated on
// its device.
#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python_module.h"

namespace memrec_python {
namespace {

enum Role : uint64_t { kTensor = 0, kGradient = 1 };  // then an optimizer state's key, numbered by _owners.py

// A strong reference held for a scope.
class Ref {
 public:
  explicit Ref(PyObject* o = nullptr) : o_(o) {}  // takes the reference
  Ref(Ref&& r) noexcept : o_(r.o_) { r.o_ = nullptr; }
  Ref& operator=(Ref&& r) noexcept {
    std::swap(o_, r.o_);
    return *this;
  }
  ~Ref() { Py_XDECREF(o_); }
  PyObject* get() const { return o_; }
  PyObject* release() { return std::exchange(o_, nullptr); }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  PyObject* o_;
};

Ref hold(PyObject* o) { return Ref(Py_NewRef(o)); }

PyTypeObject* g_tensor = nullptr;     // torch.Tensor
PyTypeObject* g_parameter = nullptr;  // torch.nn.Parameter
PyObject* g_failed = nullptr;         // _owners._failed: counts an error of memrec's own
bool g_cuda = false;                  // the recording is of the CUDA allocator (else the CPU's, device 0)

// Attribute names, interned once.
struct Names {
  PyObject* cdata = PyUnicode_InternFromString("_cdata");
  PyObject* grad = PyUnicode_InternFromString("grad");
  PyObject* is_leaf = PyUnicode_InternFromString("is_leaf");
  PyObject* local_tensor = PyUnicode_InternFromString("_local_tensor");
  PyObject* params = PyUnicode_InternFromString("params");
  PyObject* empty = PyUnicode_InternFromString("");
};
const Names& names() {
  static const Names n;
  return n;
}

// The object a weak reference points to (an address to compare, not a reference), or Py_None when it died.
const PyObject* target(PyObject* weakref) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* o = nullptr;
  PyWeakref_GetRef(weakref, &o);
  Py_XDECREF(o);  // its owner still holds it
  return o ? o : Py_None;
#else
  return PyWeakref_GET_OBJECT(weakref);
#endif
}

// Parameters and buffers named so far, by address while each lives (a weak reference's callback forgets it), in
// the order they were named: the gradients walk visits them so.
struct Known {
  PyObject* weakref;  // each owned
  PyObject* name;
  PyObject* module;
  int kind;
  uint64_t order;
};
std::unordered_map<const PyObject*, Known> g_known;
std::map<uint64_t, const PyObject*> g_known_order;
uint64_t g_known_next = 0;

void drop(Known& k) {
  Py_DECREF(k.weakref);
  Py_DECREF(k.name);
  Py_DECREF(k.module);
}

const Known* known(const PyObject* t) {
  auto it = g_known.find(t);
  return it != g_known.end() && target(it->second.weakref) == t ? &it->second : nullptr;
}

PyObject* forget_known(PyObject* address, PyObject* weakref) {
  auto it = g_known.find(static_cast<const PyObject*>(PyLong_AsVoidPtr(address)));
  if (it != g_known.end() && it->second.weakref == weakref) {
    g_known_order.erase(it->second.order);
    drop(it->second);
    g_known.erase(it);
  }
  PyErr_Clear();
  Py_RETURN_NONE;
}

PyMethodDef forget_known_def = {"forget_known", forget_known, METH_O, "a named tensor died"};

// Names t (a str name and module, an owner kind) for as long as it lives; false with a Python error when t takes no
// weak references. A tensor named again keeps its place in the order.
bool remember(PyObject* t, PyObject* name, PyObject* module, int kind) {
  PyObject* weakref = watch(t, &forget_known_def);
  if (!weakref) return false;
  auto [it, added] = g_known.try_emplace(t, Known{weakref, Py_NewRef(name), Py_NewRef(module), kind, 0});
  if (added) {
    it->second.order = ++g_known_next;
    g_known_order.emplace(it->second.order, t);
  } else {
    Known old = it->second;
    it->second = Known{weakref, Py_NewRef(name), Py_NewRef(module), kind, old.order};
    drop(old);
  }
  return true;
}

// What was last sent under (owner, role) in this recording: the tensor and its storage, each by a weak reference to
// its C++ object (the memory it holds is freed as usual, the small object itself stays until the entry goes, so no
// later tensor or storage can take its address), and the storage's data address. Never destroyed: those weak
// references would free objects after Python has finalized.
struct SentKey {
  const PyObject* owner;  // the tensor, or the parameter whose gradient or state it is
  uint64_t role;
  bool operator==(const SentKey&) const = default;
};
struct SentKeyHash {
  size_t operator()(const SentKey& k) const {
    return std::hash<const void*>()(k.owner) ^ (k.role * 0x9e3779b97f4a7c15ull);
  }
};
using TensorPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using WeakTensorPtr = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
struct Sent {
  WeakTensorPtr tensor;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uintptr_t addr;
};
auto& g_sent = *new std::unordered_map<SentKey, Sent, SentKeyHash>;

bool unchanged(const c10::TensorImpl* t, const SentKey& key, const c10::Storage& s) {
  auto it = g_sent.find(key);
  return it != g_sent.end() && it->second.tensor._unsafe_get_target() == t &&
         it->second.storage._unsafe_get_target() == s.unsafeGetStorageImpl() &&
         it->second.addr == reinterpret_cast<uintptr_t>(s.data());
}

void remember_sent(const c10::TensorImpl* t, const SentKey& key, const c10::Storage& s) {
  WeakTensorPtr tensor(TensorPtr::reclaim_copy(const_cast<c10::TensorImpl*>(t)));
  g_sent.insert_or_assign(key, Sent{std::move(tensor), s.getWeakStorageImpl(), reinterpret_cast<uintptr_t>(s.data())});
}

// Who a tensor's block belongs to: its name is `name` followed by `suffix`.
struct Owner {
  PyObject* name;  // str, held by the caller
  const char* suffix;
  PyObject* module;  // str
  int kind;
};

bool exact(PyObject* t) { return Py_TYPE(t) == g_tensor || Py_TYPE(t) == g_parameter; }

// t's TensorImpl, which t holds; nullptr with a Python error when t has none.
const c10::TensorImpl* impl_of(PyObject* t) {
  Ref cdata(PyObject_GetAttr(t, names().cdata));
  void* impl = cdata ? PyLong_AsVoidPtr(cdata.get()) : nullptr;
  if (!impl && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a tensor without a TensorImpl");
  return static_cast<const c10::TensorImpl*>(impl);
}

// The TensorImpl whose storage t's block is: a DTensor's (FSDP2) is its local shard's.
const c10::TensorImpl* storage_tensor(PyObject* t) {
  if (exact(t)) return impl_of(t);
  Ref local(PyObject_GetAttr(t, names().local_tensor));
  if (local) return impl_of(local.get());  // held by t
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
  PyErr_Clear();
  return impl_of(t);
}

// The recording's device index of the tensor, or -1 when the recording does not see its memory.
int64_t device_of(const c10::TensorImpl* impl) {
  if (g_cuda) return impl->is_cuda() ? impl->get_device() : -1;
  return impl->is_cpu() ? 0 : -1;
}

// The tensor's storage, or nullptr when it has none of its own (torch.func's wrappers): it owns no block.
const c10::Storage* storage_of(const c10::TensorImpl* impl) {
  try {
    const c10::Storage& s = impl->storage();
    return s ? &s : nullptr;
  } catch (const c10::NotImplementedError&) {
    return nullptr;
  }
}

// Records the block of t's storage as the owner's; false when nothing records or the row was dropped.
bool record(int64_t device, const c10::Storage& s, const Owner& o) {
  if (device > 255) throw std::out_of_range("device index out of range");
  Py_ssize_t len = 0, module_len = 0;
  const char* name = PyUnicode_AsUTF8AndSize(o.name, &len);
  const char* module = PyUnicode_AsUTF8AndSize(o.module, &module_len);
  if (!name || !module) throw std::invalid_argument("an owner's name that is not text");
  std::string full = std::string(name, size_t(len)) + o.suffix;
  return memrec::record_owner(static_cast<uint8_t>(device), reinterpret_cast<uintptr_t>(s.data()), s.nbytes(), full,
                              {module, size_t(module_len)}, static_cast<memrec::OwnerKind>(o.kind));
}

// Sends t's block as the owner's, unless t was sent under `key` with this storage in this recording (a new tensor
// is sent even on an old storage, as its block is a new one). Runs no Python code; throws c10::Error.
void send_impl(const c10::TensorImpl* t, const SentKey& key, const Owner& o) {
  int64_t device = device_of(t);
  if (device < 0 || t->layout() != c10::kStrided) return;
  const c10::Storage* s = storage_of(t);
  if (!s || !s->data() || unchanged(t, key, *s) || !s->nbytes() || !record(device, *s, o)) return;
  remember_sent(t, key, *s);
}

// The error of memrec's own that `send` met, counted (_owners._failed); false when an error that is not memrec's
// (a KeyboardInterrupt) must reach the program, set.
bool failed() { return handed_over(g_failed); }

// send_impl for t (the TensorImpl `impl`, when read already) with memrec's own errors counted; false as failed().
bool send(PyObject* t, const SentKey& key, const Owner& o, const c10::TensorImpl* impl = nullptr) {
  try {
    if (!impl) impl = storage_tensor(t);
    if (!impl) return failed();
    send_impl(impl, key, o);
    return true;
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return failed();
}

// The gradient of t when t is a leaf, or nullptr; held by t.
const at::Tensor* leaf_gradient(const c10::TensorImpl* t) {
  at::TensorBase tensor(TensorPtr::reclaim_copy(const_cast<c10::TensorImpl*>(t)));
  const at::Tensor& grad = t->grad();
  return tensor.is_leaf() && grad.defined() ? &grad : nullptr;
}

// A parameter's gradient, when it is a leaf and has one; false with a Python error that ends the scan. A
// torch.Tensor's or Parameter's is read through its TensorImpl (`impl`, when read already), another type's through
// Python (a DTensor's gradient is a DTensor).
bool send_gradient(PyObject* t, PyObject* name, PyObject* module, const c10::TensorImpl* impl = nullptr) {
  Owner o{name, ".grad", module, static_cast<int>(memrec::OwnerKind::gradient)};
  if (exact(t)) {
    if (!impl && !(impl = impl_of(t))) return false;
    const at::Tensor* grad = nullptr;
    try {
      grad = leaf_gradient(impl);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
      return false;
    }
    return !grad || send(t, {t, kGradient}, o, grad->unsafeGetTensorImpl());
  }
  Ref leaf(PyObject_GetAttr(t, names().is_leaf));
  int is_leaf = leaf ? PyObject_IsTrue(leaf.get()) : -1;
  if (is_leaf <= 0) return is_leaf == 0;
  Ref grad(PyObject_GetAttr(t, names().grad));
  if (!grad) return false;
  return grad.get() == Py_None || send(grad.get(), {t, kGradient}, o);
}

// A parameter or buffer named so far, and a parameter's gradient.
bool send_tensor(PyObject* t) {
  const Known* k = known(t);
  if (!k) return true;  // named, then dead: nothing to send
  Ref name = hold(k->name), module = hold(k->module);
  int kind = k->kind;
  const c10::TensorImpl* impl = exact(t) ? impl_of(t) : nullptr;
  if (exact(t) && !impl) return false;
  if (!send(t, {t, kTensor}, Owner{name.get(), "", module.get(), kind}, impl)) return false;
  return kind != static_cast<int>(memrec::OwnerKind::parameter) || send_gradient(t, name.get(), module.get(), impl);
}

bool parse_kind(PyObject* arg, int& kind) {
  long k = PyLong_AsLong(arg);
  if (k == -1 && PyErr_Occurred()) return false;
  if (k < 0 || k >= memrec::kOwnerKindCount) {
    PyErr_SetString(PyExc_ValueError, "owner kind out of range");
    return false;
  }
  kind = int(k);
  return true;
}

bool all_text(PyObject* const* args, std::initializer_list<int> at) {
  for (int i : at)
    if (!PyUnicode_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "owner names and modules are str");
      return false;
    }
  return true;
}

// owners_init(Tensor, Parameter, failed): torch's tensor types and the counter of memrec's own errors.
PyObject* owners_init(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyCallable_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "owners_init(Tensor: type, Parameter: type, failed: callable)");
    return nullptr;
  }
  Py_XSETREF(g_tensor, reinterpret_cast<PyTypeObject*>(Py_NewRef(args[0])));
  Py_XSETREF(g_parameter, reinterpret_cast<PyTypeObject*>(Py_NewRef(args[1])));
  Py_XSETREF(g_failed, Py_NewRef(args[2]));
  Py_RETURN_NONE;
}

PyObject* owners_reset(PyObject*, PyObject* cuda) {
  int is_cuda = PyObject_IsTrue(cuda);
  if (is_cuda < 0) return nullptr;
  g_cuda = is_cuda;
  g_sent.clear();
  Py_RETURN_NONE;
}

// owners_tensor(t, name, module, kind): a module's parameter or buffer, named so unless it was named before.
PyObject* owners_tensor(PyObject*, PyObject* const* args, Py_ssize_t n) {
  int kind = 0;
  if (n != 4 || !all_text(args, {1, 2}) || !parse_kind(args[3], kind)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "owners_tensor(t, name: str, module: str, kind: int)");
    return nullptr;
  }
  if (!known(args[0]) && !remember(args[0], args[1], args[2], kind)) return nullptr;
  return send_tensor(args[0]) ? Py_NewRef(Py_None) : nullptr;
}

// owners_send(t, owner, role, name, module, kind): t (an optimizer's state) under (owner, role).
PyObject* owners_send(PyObject*, PyObject* const* args, Py_ssize_t n) {
  int kind = 0;
  uint64_t role = n == 6 ? PyLong_AsUnsignedLongLong(args[2]) : 0;
  if (n != 6 || PyErr_Occurred() || !all_text(args, {3, 4}) || !parse_kind(args[5], kind)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "owners_send(t, owner, role: int, name: str, module: str, kind: int)");
    return nullptr;
  }
  return send(args[0], {args[1], role}, Owner{args[3], "", args[4], kind}) ? Py_NewRef(Py_None) : nullptr;
}

// The gradients the known parameters hold, in the order they were named.
PyObject* owners_gradients(PyObject*, PyObject*) {
  for (auto at = g_known_order.begin(); at != g_known_order.end();) {
    uint64_t order = at->first;
    const Known* k = known(at->second);
    if (k && k->kind == static_cast<int>(memrec::OwnerKind::parameter)) {
      Ref t = hold(const_cast<PyObject*>(at->second)), name = hold(k->name), module = hold(k->module);
      if (!send_gradient(t.get(), name.get(), module.get())) return nullptr;
    }
    at = g_known_order.upper_bound(order);  // the table may have changed while Python ran
  }
  Py_RETURN_NONE;
}

// An optimizer's parameter as its param_groups list it.
struct Listed {
  Ref p;
  Py_ssize_t group, index;
  bool named;
};

// Each tensor of param_groups (a list of dicts with "params"), whether named so far or not; false with an error.
bool list_params(PyObject* groups, std::vector<Listed>& out) {
  Ref each_group(PyObject_GetIter(groups));
  if (!each_group) return false;
  for (Py_ssize_t g = 0;; ++g) {
    Ref group(PyIter_Next(each_group.get()));
    if (!group) break;
    Ref params(PyObject_GetItem(group.get(), names().params));
    Ref each(params ? PyObject_GetIter(params.get()) : nullptr);
    if (!each) return false;
    for (Py_ssize_t i = 0;; ++i) {
      Ref p(PyIter_Next(each.get()));
      if (!p) break;
      if (PyObject_TypeCheck(p.get(), g_tensor)) out.push_back(Listed{hold(p.get()), g, i, known(p.get()) != nullptr});
    }
    if (PyErr_Occurred()) return false;
  }
  return !PyErr_Occurred();
}

// Names the optimizer's parameters no scanned root holds "{class}.param_groups.{group}.{index}", with no module.
bool name_unnamed(const std::vector<Listed>& params, PyObject* class_name) {
  for (const Listed& l : params) {
    if (l.named) continue;
    Ref name(PyUnicode_FromFormat("%U.param_groups.%zd.%zd", class_name, l.group, l.index));
    if (!name || !remember(l.p.get(), name.get(), names().empty, static_cast<int>(memrec::OwnerKind::parameter)))
      return false;
  }
  return true;
}

// (p, name, module) of each listed parameter that is named.
PyObject* named_list(const std::vector<Listed>& params) {
  Ref list(PyList_New(0));
  if (!list) return nullptr;
  for (const Listed& l : params) {
    const Known* k = known(l.p.get());
    if (!k) continue;
    Ref row(PyTuple_Pack(3, l.p.get(), k->name, k->module));
    if (!row || PyList_Append(list.get(), row.get()) < 0) return nullptr;
  }
  return list.release();
}

// owners_step(param_groups, class_name, may_wait, with_params): after optimizer.step(), its parameters and
// gradients. None (nothing sent) when some parameter is unnamed and may_wait (no root scanned yet: the next forward
// names them); else, with_params, a list of (parameter, name, module) for its state, or True.
PyObject* owners_step(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 4 || !PyUnicode_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "owners_step(param_groups, class_name: str, may_wait, with_params)");
    return nullptr;
  }
  std::vector<Listed> params;
  if (!list_params(args[0], params)) return nullptr;
  bool unnamed = false;
  for (const Listed& l : params) unnamed |= !l.named;
  if (unnamed && args[2] == Py_True) Py_RETURN_NONE;
  if (!name_unnamed(params, args[1])) return nullptr;
  for (const Listed& l : params)
    if (!send_tensor(l.p.get())) return nullptr;
  return args[3] == Py_True ? named_list(params) : Py_NewRef(Py_True);
}

}  // namespace

PyMethodDef owner_methods[] = {
    {"owners_init", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(owners_init)), METH_FASTCALL,
     "owners_init(Tensor, Parameter, failed): torch's tensor types; failed(error) counts memrec's own errors"},
    {"owners_reset", owners_reset, METH_O, "owners_reset(cuda): a recording starts, of the CUDA allocator or not"},
    {"owners_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(owners_tensor)), METH_FASTCALL,
     "owners_tensor(t, name, module, kind): a parameter or buffer (named so unless named before) and its gradient"},
    {"owners_send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(owners_send)), METH_FASTCALL,
     "owners_send(t, owner, role, name, module, kind): t's block, unless sent under (owner, role) unchanged"},
    {"owners_gradients", owners_gradients, METH_NOARGS, "the gradients of the parameters named so far"},
    {"owners_step", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(owners_step)), METH_FASTCALL,
     "owners_step(param_groups, class_name, may_wait, with_params): an optimizer's parameters and gradients"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace memrec_python
