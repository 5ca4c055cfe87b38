import torch, iognn
ei = torch.tensor([[0, 1, 2, -1, 4, 5], [1, 2, 3, 4, 5, 99]]).cuda()
try:
    iognn.Graph(ei, 10)
except Exception as e:
    print("raised", type(e).__name__, e)
