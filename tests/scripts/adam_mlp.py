# A small MLP trained with Adam for three steps: its parameters, gradients and optimizer state are named owners.
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(3):
    loss = model(torch.randn(32, 64)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
del loss
