// Python programs built so that one of `memrec advise`'s levers dominates, run under `memrec record` by the advise
// tests and the viewer's advice tab test (Debian's torch 1.13 on the CPU).
#pragma once

namespace memrec::test::advise_programs {

// Twelve blocks, each keeping a 2048 x 256 activation inside it (2 MiB) for backward, over 256 KiB of weights a block;
// the root module keeps its own (its tanh's output), so it is a layer that holds the others.
inline constexpr const char* kDeep = R"(import torch, torch.nn as nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 128))
                                      for _ in range(12)])

    def forward(self, x):
        return self.layers(x).tanh()


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2048, 128)
for step in range(3):
    opt.zero_grad(set_to_none=True)
    model(x).pow(2).mean().backward()
    opt.step()
)";

// Each step keeps a copy of the output (2 MiB) before stepping: the list grows by it every step.
inline constexpr const char* kGrowing = R"(import torch, torch.nn as nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))

    def forward(self, x):
        return self.net(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2048, 256)
history = []
for step in range(10):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    out.pow(2).mean().backward()
    history.append(out.detach().clone())
    opt.step()
)";

// 12 MiB of weights and a batch of 8: on torch 1.13 zero_grad() keeps 12 MiB of zeroed gradients through forward.
inline constexpr const char* kZeroGrad = R"(import torch, torch.nn as nn
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Linear(1024, 1024))

    def forward(self, x):
        return self.net(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 1024)
for step in range(3):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
)";

// set_to_none=True, and a hook in backward that runs a backward of its own (a gradient penalty's autograd.grad) over
// 4 MiB tensors: the peak is inside that nested backward, after the outer one made the last two layers' gradients.
inline constexpr const char* kNestedBackward = R"(import torch, torch.nn as nn
torch.manual_seed(0)


def penalty(grad):
    with torch.enable_grad():  # backward runs its hooks without grad mode
        side = torch.randn(1 << 20, requires_grad=True)
        torch.autograd.grad(side.exp().sum(), side)
    return grad


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(1024, 1024)
        self.b = nn.Sequential(nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024))

    def forward(self, x):
        h = self.a(x)
        h.register_hook(penalty)
        return self.b(h)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 1024)
for step in range(3):
    opt.zero_grad(set_to_none=True)
    model(x).pow(2).mean().backward()
    opt.step()
)";

}  // namespace memrec::test::advise_programs
